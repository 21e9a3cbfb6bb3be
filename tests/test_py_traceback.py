"""Exception readers: Python tracebacks, chains, faulthandler, C++ terminate; OOM sizes; phase."""

from __future__ import annotations

import pytest
from forensics.parsers.common.stream_text import Follower
from forensics.parsers.producers.py_traceback import exception_type, frame_of, oom_attrs, phase_of, read_python

from forensics.ingest.textdoc import TextDocument


def read(text: str) -> tuple[str, list[str], str | None, list[str]]:
    doc = TextDocument(text.encode(), "x")
    first = next(doc.lines())
    rec = read_python(first.text, Follower(doc, first, "", False))
    return rec.message, rec.frames, rec.exc_type, rec.exceptions


def test_exception_type_recognises_class_names_only() -> None:
    assert exception_type("torch.OutOfMemoryError: CUDA out of memory.") == "torch.OutOfMemoryError"
    assert exception_type("ncclUnhandledCudaError: Call to CUDA function failed.") == "ncclUnhandledCudaError"
    assert exception_type("KeyboardInterrupt") == "KeyboardInterrupt"
    assert exception_type("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ") is not None
    for not_exc in ("else:", "steps: 0%|", "Epoch 0: 6%", "train()", "Loading checkpoint shards:  57%"):
        assert exception_type(not_exc) is None, not_exc


def test_frame_flavours() -> None:
    assert frame_of('File "/usr/lib/python3.10/site-packages/torch/_tensor.py", line 487, in backward') == \
        "torch/_tensor.py:backward"
    assert frame_of('File "/opt/tiger/codealpaca/train.py", line 225, in') == "/opt/tiger/codealpaca/train.py:?"
    assert frame_of('File "x.py", line 3938 in barrier') == "x.py:barrier"  # faulthandler: no comma
    assert frame_of("File ~/work/nb.py:487, in train") == "~/work/nb.py:train"
    assert frame_of("│ /usr/local/bin/accelerate:8 in <module>     │") == "/usr/local/bin/accelerate:<module>"
    assert frame_of("RuntimeError: x") is None


def test_chained_traceback_keeps_every_exception() -> None:
    text = """Traceback (most recent call last):
  File "a.py", line 1, in f
    g()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "a.py", line 9, in main
    cleanup()
RuntimeError: cleanup failed
next line of the log
"""
    message, frames, typ, exceptions = read(text)
    assert message == "RuntimeError: cleanup failed" and typ == "RuntimeError"
    assert exceptions[0].startswith("torch.OutOfMemoryError") and len(exceptions) == 2
    assert frames == ["a.py:f", "a.py:main"]


def test_dataparallel_replica_error_is_unwrapped() -> None:
    text = """Traceback (most recent call last):
  File "train.py", line 5, in <module>
    model(x)
RuntimeError: Caught RuntimeError in replica 0 on device 0.
Original Traceback (most recent call last):
  File "torch/nn/parallel/parallel_apply.py", line 61, in _worker
    output = module(*input, **kwargs)
RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB
"""
    message, _, _, exceptions = read(text)
    assert message.startswith("RuntimeError: CUDA out of memory") and len(exceptions) == 2


@pytest.mark.parametrize(("text", "expected"), [
    ("RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; 8.57 MiB "
     "already allocated; 9.28 GiB free; 4.68 MiB cached)",
     {"gpu": 0, "tried_mib": 12.5, "total_mib": 10.92 * 1024, "free_mib": 9.28 * 1024, "reserved_mib": 4.68}),
    ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 136.00 MiB. GPU 0 has a total capacty of "
     "23.65 GiB of which 93.81 MiB is free. Process 62201 has 398.00 MiB memory in use. Of the allocated memory "
     "21.51 GiB is allocated by PyTorch, and 2.30 MiB is reserved by PyTorch but unallocated.",
     {"gpu": 0, "tried_mib": 136.0, "free_mib": 93.81, "reserved_unallocated_mib": 2.3}),
    ("OutOfMemoryError: HIP out of memory. Tried to allocate 704.00 GiB. GPU 0 has a total capacity of 191.69 GiB "
     "of which 180.00 GiB is free.", {"oom": "hip", "tried_mib": 704 * 1024, "total_gib": 191.69}),
    ("RuntimeError: CUDA out of memory. Tried to allocate more than 1EB memory.", {"tried_mib": 2.0**40}),
])
def test_oom_generations(text: str, expected: dict[str, object]) -> None:
    attrs = oom_attrs(text)
    for key, value in expected.items():
        if isinstance(value, float):
            assert attrs[key] == pytest.approx(value, rel=1e-3), key
        else:
            assert attrs[key] == value, key
    assert oom_attrs("RuntimeError: something else") == {}


def test_phase_from_frames() -> None:
    assert phase_of(["train.py:main", "torch/optim/adamw.py:step", "torch/optim/adamw.py:_multi_tensor_adamw"]) == \
        "optimizer-step"
    assert phase_of(["train.py:main", "torch/_tensor.py:backward", "torch/autograd/__init__.py:backward"]) == "backward"
    assert phase_of(["train.py:main", "transformers/modeling_utils.py:from_pretrained"]) == "load"
    assert phase_of(["train.py:main"]) is None
