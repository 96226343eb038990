"""Data: one loader module per published format, the bundle's own record schemas, and the bundle build.

dpr        DPR retriever json (read + write), DPR qas TSV / anserini topics (TSV and JSONL)
nq_open    NQ-open jsonl
overlap    Lewis et al. 2020 test-train overlap annotations
squad      SQuAD json v1.1 / v2.0 (XQuAD, haystack sample)
wiki       psgs_w100.tsv, pyserini JsonCollection, Vital-Articles summaries, DPR-style 100-word split
nq_gold    NQ test gold passages (Power of Noise, Lost in the Middle) and the NQ detokenizer
records    schemas, text style and validating readers of the bundle's files (read_corpus also reads psgs_w100 /
           JsonCollection)
bundle     ``python -m ecqg.data.bundle --raw RAW --out data`` (data/README.md)
"""
