"""The retrieval-naive base: a small BERT pre-trained here by masked-language modelling only, on the offline
Wikipedia text, so that a DPR trained from it starts, as the paper's does from BERT-base, from a model that has never
learned retrieval (the bundled MiniLM has: NQ, TriviaQA, SQuAD and 64M PAQ questions). Its text and digest
(``text``), its WordPiece vocabulary (``vocab``), the masked-LM model and loss (``model``), and the one resumable
build command (``build``)."""
