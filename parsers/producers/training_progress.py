"""Training-progress and throughput lines → ``progress`` events (catalog §1.10).

Shapes read: HF Trainer dicts (``{'loss': 2.1, 'grad_norm': nan, ...}``), tqdm bars
(``12/100 [00:10<01:20, 1.23it/s, loss=2.6]``, ``s/it`` normalised to ``it_s`` too), rich bars,
DeepSpeed (``step=10, skipped=6``, ``SamplesPerSec=``, ``OVERFLOW! ... reducing to``), Megatron
(``elapsed time per iteration (ms): 126995.3 | ... lm loss: 2.38E+00``), and custom lines
(``step 12 | loss 0.12 | 524,288 tokens/s | 12.3 ms/step``, ``21.5 Ktok/s``).

Attributes use one vocabulary: ``step``, ``total``, ``loss``, ``grad_norm``, ``lr``, ``epoch``,
``it_s``, ``s_it``, ``tokens_s``, ``samples_s``, plus ``loss_scale``/``overflow`` for fp16
scaler lines and ``desc`` for a bar's label (``Loading checkpoint shards`` is not training).

:class:`Thinner` bounds how many progress events one file yields (see its docstring).
"""

from __future__ import annotations

import math
import re
from typing import Any

from forensics.lazy_re import lazy_compile

__all__ = ["MAX_REGULAR", "Thinner", "is_anomalous", "parse_progress"]

_NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+)|nan|NaN|-?inf|-?Infinity"

_DICT_PAIR = lazy_compile(r"'([\w/.\- ]+)':\s*(" + _NUM + r"|'[^']*')")
_DICT_KEYS = {"loss": "loss", "train_loss": "loss", "grad_norm": "grad_norm", "learning_rate": "lr", "lr": "lr",
              "epoch": "epoch", "step": "step", "global_step": "step", "eval_loss": "eval_loss",
              "train_tokens_per_second": "tokens_s", "tokens_per_second": "tokens_s",
              "train_samples_per_second": "samples_s", "train_steps_per_second": "it_s",
              "num_input_tokens_seen": "tokens_seen"}

_TQDM = lazy_compile(r"(?<!\d)(?P<n>\d+)/(?P<total>\d+|\?)\s*\[(?P<elapsed>[\d:]+)<(?P<remaining>[\d:?]*),\s*"
                     r"(?P<rate>[\d.]+|\?)\s*(?P<unit>[A-Za-z/]+)(?:,\s*(?P<post>[^\]]*))?\]")
#: Where a tqdm bar starts: the description is what comes before it (see :func:`_tqdm_desc`).
_BAR_START = lazy_compile(r"[|━╸╺─█▏▎▍▌▋▊▉#]")
_POST_PAIR = lazy_compile(r"(?<![\w.])([\w.]+)=(" + _NUM + r")")

_RATE = lazy_compile(
    r"(?<![\d,]),*(?P<v>\d[\d,]*(?:\.\d+)?)\s*(?:(?P<mult>[KkMG](?=\s*(?:tok|sample|it)))\s*)?"
    r"(?P<unit>tok(?:en)?s?/s(?:ec)?|it/s|s/it|samples?/s(?:ec)?|sec/step|s/step|ms/step|ms/it)\b"
)
_KEYED_RATES = (
    ("samples_s", re.compile(r"SamplesPerSec=(" + _NUM + r")")),
    ("samples_s", re.compile(r"samples/sec:\s*(" + _NUM + r")")),
    ("samples_s", re.compile(r"samples_per_second'?[:=]\s*(" + _NUM + r")")),
    ("tokens_s", re.compile(r"tokens_per_second'?[:=]\s*(" + _NUM + r")")),
    ("ms_it", re.compile(r"elapsed time per iteration \(ms\):\s*(" + _NUM + r")")),
)
_STEP = lazy_compile(r"(?<![\w/])(?:global_step|step|Step|iteration|iter|Steps|steps)\s*(?:[:=]\s*)?(\d+)"
                     r"(?:\s*/\s*(\d+))?(?![\w.%])")
_LOSS = lazy_compile(r"(?<![\w/])(?:lm loss|train_loss|avr_loss|loss|Loss)\s*(?:[:=]\s*)?(" + _NUM + r")(?![\w])")
_GRAD = lazy_compile(r"(?<![\w/])grad[_ ]norm\s*(?:[:=]\s*)?(" + _NUM + r")")
_LR = lazy_compile(r"(?<![\w/])(?:lr|learning rate|learning_rate)\s*(?:[:=]\s*)?\[?(" + _NUM + r")")
_OVERFLOW = lazy_compile(r"OVERFLOW! Rank (\d+) Skipping step\. Attempted loss scale: ([\d.]+), reducing to ([\d.]+)")
_DYN_SCALE = lazy_compile(r"Reducing dynamic loss scale from ([\d.]+) to ([\d.]+)")
_GRAD_OVERFLOW = lazy_compile(r"Grad overflow on iteration (\d+)")
_SKIPPED = lazy_compile(r"(?:skipped=|number of skipped iterations:\s*)(\d+)")
_NAN_ITERS = lazy_compile(r"number of nan iterations:\s*(\d+)")
_LOSS_SCALE = lazy_compile(r"loss scale:\s*(" + _NUM + r")")


def _num(s: str) -> float | None:
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def _rate_attrs(value: float, unit: str, mult: str | None, out: dict[str, Any]) -> None:
    factor = {"K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9}.get(mult or "", 1.0)
    value *= factor
    if unit == "it/s":
        out["it_s"] = value
        if value > 0:
            out.setdefault("s_it", 1 / value)
    elif unit in ("s/it", "sec/step", "s/step"):
        out["s_it"] = value
        if value > 0:
            out.setdefault("it_s", 1 / value)
    elif unit in ("ms/step", "ms/it"):
        out["s_it"] = value / 1000
        if value > 0:
            out.setdefault("it_s", 1000 / value)
    elif unit.startswith("tok"):
        out["tokens_s"] = value
    elif unit.startswith("sample"):
        out["samples_s"] = value


def _hf_dict(text: str, out: dict[str, Any]) -> bool:
    start = text.find("{'")
    if start < 0:
        return False
    found = False
    for key, raw in _DICT_PAIR.findall(text, start):
        name = _DICT_KEYS.get(key)
        if name is None or raw.startswith("'"):
            continue
        value = _num(raw)
        if value is None:
            continue
        out[name] = int(value) if name == "step" and math.isfinite(value) else value
        found = True
    return found


def _tqdm_desc(prefix: str) -> str:
    """A tqdm line's description: what comes before its bar (``|``, ``━`` …), without the ``NN%`` and the
    ``:`` before it (``Epoch 1: 45%|███`` → ``Epoch 1``). Linear, unlike the one regex it replaces."""
    bar = _BAR_START.search(prefix)
    text = (prefix[: bar.start()] if bar else prefix).rstrip()
    if text.endswith("%") and text[:-1].rstrip("0123456789") != text[:-1]:
        text = text[:-1].rstrip("0123456789").rstrip()
    return text.removesuffix(":").strip()


def _tqdm(text: str, out: dict[str, Any]) -> bool:
    m = _TQDM.search(text)
    if not m:
        return False
    out["step"] = int(m.group("n"))
    if m.group("total") != "?":
        out["total"] = int(m.group("total"))
    desc = _tqdm_desc(text[: m.start()])
    if desc:
        out["desc"] = desc[:80]
    rate = m.group("rate")
    if rate != "?":
        value = _num(rate)
        if value is not None:
            _rate_attrs(value, m.group("unit"), None, out)
    post = m.group("post") or ""
    for key, raw in _POST_PAIR.findall(post):
        value = _num(raw)
        if value is None:
            continue
        if key in ("loss", "avr_loss", "train_loss", "reduced_train_loss") and "loss" not in out:
            out["loss"] = value
        elif key in ("lr", "learning_rate"):
            out["lr"] = value
        elif key == "grad_norm":
            out["grad_norm"] = value
        elif key == "global_step" and math.isfinite(value):
            out["global_step"] = int(value)
    for r in _RATE.finditer(post):
        value = _num(r.group("v"))
        if value is not None and r.group("unit").startswith("tok"):
            out["tokens_s"] = value  # vLLM: "est. speed input: 218.76 toks/s, output: 88.68 toks/s" -> output
    return True


def parse_progress(text: str) -> dict[str, Any] | None:
    """Progress attributes of one line (one bar segment), or ``None`` when it is not a progress line."""
    out: dict[str, Any] = {}
    if "OVERFLOW!" in text:
        m = _OVERFLOW.search(text)
        if m:
            out.update(overflow=True, rank=int(m.group(1)), attempted_loss_scale=_num(m.group(2)),
                       loss_scale=_num(m.group(3)))
            return out
    if "overflow" in text or "loss scale" in text:
        m = _GRAD_OVERFLOW.search(text)
        if m:
            out.update(overflow=True, step=int(m.group(1)))
        m = _DYN_SCALE.search(text)
        if m:
            out.update(overflow=True, attempted_loss_scale=_num(m.group(1)), loss_scale=_num(m.group(2)))
        if out:
            return out
    if "{'" in text and _hf_dict(text, out):
        return out
    if "/" in text and "[" in text and _tqdm(text, out):
        _generic(text, out, rates=False)
        return out
    _generic(text, out, rates=True)
    throughput = any(k in out for k in ("it_s", "s_it", "tokens_s", "samples_s"))
    if throughput or ("step" in out and ("loss" in out or "lr" in out)) or ("loss" in out and "grad_norm" in out):
        return out
    return None


_DS_RANK = lazy_compile(r"^\[Rank (\d+)\] ")


def _generic(text: str, out: dict[str, Any], rates: bool) -> None:
    m = _DS_RANK.match(text)  # DeepSpeed log_dist: "[Rank 0] step=10, skipped=6, lr=[...]"
    if m:
        out["rank"] = int(m.group(1))
    if rates:
        for r in _RATE.finditer(text):
            value = _num(r.group("v"))
            if value is not None:
                _rate_attrs(value, r.group("unit"), r.group("mult"), out)
        for name, rx in _KEYED_RATES:
            m = rx.search(text)
            if m:
                value = _num(m.group(1))
                if value is None:
                    continue
                if name == "ms_it":
                    _rate_attrs(value, "ms/it", None, out)
                else:
                    out[name] = value
    if "step" not in out:
        m = _STEP.search(text)
        if m:
            out["step"] = int(m.group(1))
            if m.group(2):
                out["total"] = int(m.group(2))
    if "loss" not in out:
        m = _LOSS.search(text)
        if m:
            out["loss"] = _num(m.group(1))
    if "grad_norm" not in out:
        m = _GRAD.search(text)
        if m:
            out["grad_norm"] = _num(m.group(1))
    if "lr" not in out:
        m = _LR.search(text)
        if m:
            out["lr"] = _num(m.group(1))
    if "skipped" in text or "skipped iterations" in text:
        m = _SKIPPED.search(text)
        if m:
            out["skipped"] = int(m.group(1))
    if "nan iterations" in text:
        m = _NAN_ITERS.search(text)
        if m:
            out["nan_iterations"] = int(m.group(1))
    if "loss scale:" in text:
        m = _LOSS_SCALE.search(text)
        if m:
            out["loss_scale"] = _num(m.group(1))


def is_anomalous(attrs: dict[str, Any]) -> bool:
    """A progress line worth keeping whatever the thinning: non-finite or zero loss, NaN grad norm,
    fp16 overflow, NaN iterations."""
    for key in ("loss", "grad_norm", "eval_loss"):
        v = attrs.get(key)
        if isinstance(v, float) and (not math.isfinite(v) or (key == "loss" and v == 0.0)):
            return True
    return bool(attrs.get("overflow") or attrs.get("nan_iterations"))


#: Regular (non-anomalous) progress events kept per file before the stride doubles.
MAX_REGULAR = 2048


class Thinner:
    """Bounds the progress events of one file without losing their shape.

    Every anomalous line (NaN/inf/zero loss, NaN grad norm, overflow) is kept, and so are the
    first 64 lines. The others are kept one in ``stride``; when more than :data:`MAX_REGULAR`
    are held, the stride doubles and every other held one is dropped, so a file of any length
    yields an evenly spaced series of at most ~2k points (plus the last line, always kept).
    ``wanted`` is asked *before* a line is parsed, so skipped lines cost almost nothing; for a big
    file the stride starts where the file's size says it will end up (``size_hint``: about one
    progress line per 4 KiB), so the early part is not parsed densely only to be dropped.
    """

    def __init__(self, cap: int = MAX_REGULAR, head: int = 64, size_hint: int = 0) -> None:
        self.cap = cap
        self.head = head
        self.stride = 1
        while self.stride * 2 * cap * 4096 <= size_hint:
            self.stride *= 2
        self.seen = 0
        self.held: list[tuple[int, Any]] = []  # (sequence number, item) of regular lines

    def next_seq(self) -> int:
        seq = self.seen
        self.seen += 1
        return seq

    def wanted(self, seq: int) -> bool:
        return seq < self.head or seq % self.stride == 0

    def hold(self, seq: int, item: Any) -> None:
        self.held.append((seq, item))
        if len(self.held) > self.cap:
            self.stride *= 2
            self.held = [(s, it) for s, it in self.held if s < self.head or s % self.stride == 0]

    def kept(self, last: tuple[int, Any] | None) -> list[Any]:
        items = self.held
        if last is not None and (not items or items[-1][0] != last[0]):
            items = [*items, last]
        return [it for _, it in items]
