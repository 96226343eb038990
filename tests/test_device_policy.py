"""The one device policy (``ecqg.core.device``): settings, autocast per device, and no model-running step bypassing it.

How a bypass is caught on a machine without a GPU: ``place`` is wrapped so that it records every model it puts on
the policy's device, and a global forward hook records every module that runs. A step passes only when each module
that ran belongs to a model the policy placed, and sits on the device the policy named. A step that runs a model it
never handed to the policy (``model(**batch)`` outside ``ecqg.runtime.models.inference``) fails here, as it would leave the
model on the host of a GPU machine.
"""

import contextlib

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BartConfig, BartForConditionalGeneration, BertConfig, BertForQuestionAnswering
from transformers import BertModel

from ecqg.core import device
from ecqg.runtime.models import resolve_model
from ecqg.retrieval.biencoder import BiEncoder, BiEncoderConfig

TOKENIZER = AutoTokenizer.from_pretrained(resolve_model("bundled:minilm"))
TEXT = ("Angela Merkel flew from Berlin to Paris on Monday. In Paris, she met Emmanuel Macron. Both leaders later "
        "returned to Berlin.")
PASSAGES = [{"id": f"p{i}", "title": t, "text": f"{t} lies on a river. " + TEXT} for i, t in
            enumerate(["Lyon", "Porto", "Graz"])]


def _bert(**extra):
    config = BertConfig(num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=32,
                        vocab_size=TOKENIZER.vocab_size, max_position_embeddings=128, **extra)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return config


def _biencoder():
    config = _bert()
    return BiEncoder(BertModel(config), BertModel(config), TOKENIZER,
                     BiEncoderConfig("tiny-random", passage_max_length=64, query_max_length=16))


@contextlib.contextmanager
def policed(monkeypatch):
    """Record what the policy placed and every module that ran; yield the list of offences found afterwards."""
    placed: dict[int, torch.device] = {}
    real_place = device.place

    def spy(model, setting=None):
        where = real_place(model, setting)
        placed.update({id(m): where for m in model.modules()})
        return where

    monkeypatch.setattr(device, "place", spy)
    offences: list[str] = []

    def hook(module, _inputs):
        if not any(True for _ in module.parameters(recurse=False)):
            return
        if id(module) not in placed:
            offences.append(f"{type(module).__name__} ran without the device policy")
        elif next(module.parameters()).device != placed[id(module)]:
            offences.append(f"{type(module).__name__} ran on {next(module.parameters()).device}")

    handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)
    try:
        yield offences
    finally:
        handle.remove()


def _steps():
    """Each model-running step of the pipeline on tiny random models: name -> callable."""
    from ecqg import qg
    from ecqg.retrieval import probes
    from ecqg.analysis import attention, poly_codes
    from ecqg.filtering import reader
    from ecqg.retrieval import dense
    from ecqg.retrieval.polydpr import PolyConfig, PolyDPR

    def encode():            # retrieve_dense, 03's hardness, 06's probe, 07's slices
        model = _biencoder()
        dense.encode_passages(model, PASSAGES, batch_size=2, progress=False, prefetch=True)
        dense.encode_queries(model, ["where is Lyon?"], progress=False)

    def cls_attention():     # 01, 06
        model = _biencoder()
        attention.cls_attention(model, [p["title"] for p in PASSAGES], [p["text"] for p in PASSAGES], batch_size=2)

    def sampling():          # 02 (also after a resumed run: the generator comes from disk onto the host)
        config = BartConfig(vocab_size=TOKENIZER.vocab_size, d_model=16, encoder_layers=1, decoder_layers=1,
                            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                            decoder_ffn_dim=32, pad_token_id=0, bos_token_id=101, eos_token_id=102,
                            decoder_start_token_id=102)
        model = BartForConditionalGeneration(config)
        inputs = [{"passage_id": p["id"], "title": p["title"], "text": p["text"], "entity": None} for p in PASSAGES]
        qg.generate_questions(model, TOKENIZER, inputs, samples=1, batch_size=2, max_new_tokens=3, progress=False)

    def reader_round_trip():  # 03
        model = BertForQuestionAnswering(_bert())
        questions = [{"id": "q", "question": "who met Macron?", "context": TEXT}]
        reader.predict(model, TOKENIZER, questions, max_length=64, stride=16, progress=False)

    def poly():              # 06's Poly codes analysis
        config = _bert()
        model = PolyDPR(BertModel(config), BertModel(config), TOKENIZER,
                        PolyConfig("tiny", codes=3, query_max_length=16, passage_max_length=64))
        poly_codes.code_attention(model, PASSAGES, batch_size=2)

    def template_selection():   # 08: TempQG's selector (a Poly-DPR) picks a template per passage
        from ecqg.tempqg import selector

        config = _bert()
        model = PolyDPR(BertModel(config), BertModel(config), TOKENIZER,
                        PolyConfig("tiny", codes=3, query_max_length=64, passage_max_length=16))
        selector.select(model, PASSAGES, ["Where is _?", "Who met _?"], k=1, batch_size=2)

    def moved_sentence():    # 07's probe
        pairs = [{"question": "who met Macron?", "passage_id": "p0", "title": "Lyon", "front": TEXT, "end": TEXT}]
        probes.moved_sentence_scores(_biencoder(), pairs, batch_size=2)

    return {f.__name__: f for f in (encode, cls_attention, sampling, reader_round_trip, poly, template_selection,
                                          moved_sentence)}


@pytest.mark.parametrize("step", list(_steps()))
def test_every_model_running_step_goes_through_the_policy(monkeypatch, step):
    with policed(monkeypatch) as offences:
        _steps()[step]()
    assert offences == [], offences


def test_a_bypass_is_caught(monkeypatch):
    """The check above can fail: a forward pass outside the policy is reported."""
    model = _biencoder()
    with policed(monkeypatch) as offences:
        with torch.no_grad():
            model.encode_queries(model.tokenize_queries(["a question"]))
    assert offences and "without the device policy" in offences[0]


def test_settings_and_their_errors(monkeypatch):
    monkeypatch.setattr(device, "_configured", "auto")      # restored afterwards: the policy is process-wide
    monkeypatch.delenv(device.ENV_VAR, raising=False)
    assert device.configure({"device": "cpu"}) == "cpu" and device.resolve() == torch.device("cpu")
    monkeypatch.setenv(device.ENV_VAR, "auto")              # the environment wins over params, for one run
    assert device.configure({"device": "cpu"}) == "auto"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert device.resolve("auto") == torch.device("cpu")
    with pytest.raises(RuntimeError, match="'cuda' but no CUDA GPU is visible.*device: auto"):
        device.resolve("cuda")
    for bad in ("gpu", "cuda:x", 3):
        assert not device.is_valid_setting(bad)
        with pytest.raises(ValueError, match="expected auto, cpu, cuda or cuda:N"):
            device.configure({"device": bad})
    monkeypatch.setenv(device.ENV_VAR, "tpu")
    with pytest.raises(ValueError, match="ECQG_DEVICE='tpu'"):
        device.resolve()


def test_auto_under_a_launcher_takes_the_gpu_of_its_rank(monkeypatch):
    monkeypatch.delenv(device.ENV_VAR, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("LOCAL_RANK", "2")
    assert device.resolve("auto") == torch.device("cuda", 2)


@pytest.mark.parametrize("native, device_type, expected", [
    (True, "cpu", "bfloat16"), (False, "cpu", None), (True, "cuda", "bfloat16"), (False, "cuda", "float16")])
def test_autocast_is_chosen_per_device(monkeypatch, native, device_type, expected):
    monkeypatch.setattr(device, "native_bf16", lambda _type="cpu": native)
    assert device.autocast_dtype("auto", device_type) == expected
    assert device.autocast_dtype(None, device_type) is None and device.autocast_dtype("float16", device_type) == \
        "float16"
    with pytest.raises(ValueError, match="autocast is 'half'"):
        device.autocast_dtype("half", device_type)


def test_inference_runs_under_the_autocast_it_resolved(monkeypatch):
    from ecqg.runtime.models import inference

    model = torch.nn.Linear(2, 2)
    for native, enabled in ((True, True), (False, False)):
        monkeypatch.setattr(device, "native_bf16", lambda _type="cpu", native=native: native)
        with inference(model, "auto") as where:
            assert where == torch.device("cpu") and torch.is_autocast_enabled("cpu") is enabled
    assert model.training


def test_prefetched_encoding_equals_the_plain_loop():
    from ecqg.retrieval import dense

    model = _biencoder()
    many = [{**p, "id": f"{p['id']}-{k}", "text": p["text"][: 20 + 7 * k]} for k in range(9) for p in PASSAGES]
    plain = dense.encode_passages(model, many, batch_size=4, chunk_size=5, progress=False, prefetch=False)
    ahead = dense.encode_passages(model, many, batch_size=4, chunk_size=5, progress=False, prefetch=True)
    assert plain[0] == ahead[0] == [p["id"] for p in many]
    np.testing.assert_array_equal(plain[1], ahead[1])
    one = list(dense._tokenized_chunks(model, iter(many), 20, prefetch=False))
    for threads in (1, 3, 8):        # slices of 7, and slices of 3 with a short last one
        sliced = list(dense._tokenized_chunks(model, iter(many), 20, prefetch=True, threads=threads))
        assert sliced == one
    assert dense.tokenize_threads() >= 1
    with pytest.raises(ValueError, match="passage 3 of the shard has no 'text' field"):
        dense.encode_passages(model, many[:3] + [{"id": "x"}], chunk_size=2, progress=False, prefetch=True)
