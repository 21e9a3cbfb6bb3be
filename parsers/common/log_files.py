"""Which files a folder expansion reads: logs, not the project around them.

``forensics analyze .`` in a project folder used to read ``README.md`` (one line mentioning Xid 79 was a
high-confidence root cause citing ``README.md:2``) and the ``.py`` files' docstrings. A file found by
walking a folder the user named is now read when it is a log: skipped are source code, documentation
(Markdown, README, licences), configuration (TOML, YAML, JSON, INI, ``.env``) and images or model
weights — *unless* its content detects as a known log format other than the generic ones (a
``torchelastic`` ``error.json``, a ``dcgmi -j`` dump, an ``nvidia-smi -q -x`` ``.xml``). Everything else
(``.log``, ``.txt``, ``.out``, no extension …) is read as before, and a path the user names is always read.
The caller counts what was skipped and says so ("name them to read them").
"""

from __future__ import annotations

from forensics.ingest.textdoc import TextDocument

__all__ = ["GENERIC_FORMATS", "not_a_log"]


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_CODE = _set(".py .pyi .pyx .pyc .ipynb .c .h .cc .cpp .cxx .hh .hpp .cu .cuh .js .mjs .ts .go .rs .java .kt "
                  ".scala .rb .pl .php .lua .r .jl .sh .bash .zsh .fish .ps1 .psm1 .bat .cmd .cmake .mk .sql "
                  ".swift .m .mm .f90 .proto .tcss .css")
_DOCS = _set(".md .markdown .rst .adoc .asciidoc .tex .org .html .htm .pdf .doc .docx .odt .rtf .epub")
_CONFIG = _set(".toml .yaml .yml .ini .cfg .conf .json .env .lock .properties .editorconfig .gitignore "
                    ".gitattributes .gitmodules .dockerignore .npmrc .pylintrc .flake8 .tf .hcl .nix .xsd")
_DATA = _set(".png .jpg .jpeg .gif .svg .webp .ico .bmp .tif .tiff .heic .mp4 .mov .avi .mkv .webm .mp3 .wav "
                  ".pt .pth .ckpt .safetensors .bin .npy .npz .h5 .hdf5 .onnx .pb .tflite .parquet .arrow .feather "
                  ".whl .so .o .a .pyd .dll .exe .dylib .class .jar .ttf .otf .woff .woff2 .db .sqlite")
_NAMES = ("readme", "license", "licence", "copying", "notice", "authors", "contributing", "changelog", "changes",
          "code_of_conduct", "security", "makefile", "dockerfile", "containerfile", "cmakelists.txt", "pipfile",
          "gemfile", "procfile", "requirements", "constraints", "case.toml", "expected.toml")
#: Formats any text detects as: not evidence that a file is a log.
GENERIC_FORMATS = frozenset({"text", "process-output"})
_HEAD_BYTES = 64 << 10


def _label(name: str) -> str | None:
    """What kind of not-a-log ``name`` is by its name (``.py``, ``README``), or None."""
    base = name.rsplit("/", 1)[-1].rsplit("!", 1)[-1].rsplit("\\", 1)[-1]
    low = base.lower()
    for prefix in _NAMES:
        if low == prefix or low.startswith((prefix + ".", prefix + "-", prefix + "_")):
            return base.split(".", 1)[0] if prefix not in ("case.toml", "expected.toml") else ".toml"
    if low.endswith(".gz"):  # a compressed one is judged by the name inside
        low = low[:-3]
    dot = low.rfind(".")
    ext = low[dot:] if dot > 0 else ""
    if ext in _CODE or ext in _DOCS or ext in _CONFIG or ext in _DATA:
        return ext
    return None


def _known_format(raw: bytes) -> bool:
    """Whether ``raw``'s first lines detect as a log format other than the generic ones."""
    from forensics.parsers.registry import detect

    head = TextDocument.from_bytes(bytes(raw[:_HEAD_BYTES]), "head").head()
    parser, score = detect(head)
    return parser.name not in GENERIC_FORMATS and score >= 0.5


def not_a_log(display: str, raw: bytes) -> str | None:
    """The label to count ``display`` under when a folder expansion should skip it (``.py``, ``.md``,
    ``README``), or None to read it."""
    label = _label(display)
    if label is None or _known_format(raw):
        return None
    return label
