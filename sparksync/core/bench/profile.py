"""What a benchmark measures: the llama-benchy settings, as one validated model.

The default is the profile NVIDIA published its figures with (FACTS.md):
concurrency 1, 8,192 prompt tokens, 256 generated tokens, no speculative
decoding, and llama-benchy's own runs and warmup. Users may change any of
it; the profile is then stored as "custom" so a history never passes a
custom run off as comparable with the published one.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sparksync.core.bench.errors import BenchInputError

PUBLISHED: Final = "published"
CUSTOM: Final = "custom"
# llama-benchy 0.4.0's own default for --runs; the pin keeps it true.
LLAMA_BENCHY_DEFAULT_RUNS = 3

_PUBLISHED_VALUES = {"pp": (8192,), "tg": (256,), "depth": (0,), "concurrency": (1,), "runs": None,
                     "warmup": True, "exact_tg": False, "no_cache": False, "speculative_decoding": False}


class BenchProfile(BaseModel):
    """One llama-benchy suite: every pp x tg x depth x concurrency combination, ``runs`` times."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Literal["published", "custom"] = CUSTOM
    pp: tuple[int, ...] = Field((8192,), min_length=1, description="Prompt tokens per request")
    tg: tuple[int, ...] = Field((256,), min_length=1, description="Generated tokens per request")
    depth: tuple[int, ...] = Field((0,), min_length=1, description="Earlier conversation tokens")
    concurrency: tuple[int, ...] = Field((1,), min_length=1, description="Requests in flight at once")
    runs: int | None = Field(None, ge=1, description="Runs per test; None keeps llama-benchy's default")
    warmup: bool = Field(True, description="llama-benchy's warmup request before each test")
    exact_tg: bool = Field(False, description="Ask the server for exactly tg tokens (ignore_eos)")
    no_cache: bool = Field(False, description="Defeat the server's prompt cache")
    # Speculative decoding is a server setting, not a llama-benchy one: this is
    # what the run expects, and the preflight warns when the server disagrees.
    speculative_decoding: bool = False

    @field_validator("pp", "tg", "concurrency")
    @classmethod
    def _positive(cls, values: tuple[int, ...]) -> tuple[int, ...]:
        if any(v < 1 for v in values):
            raise ValueError("every value must be at least 1")
        return values

    @field_validator("depth")
    @classmethod
    def _not_negative(cls, values: tuple[int, ...]) -> tuple[int, ...]:
        if any(v < 0 for v in values):
            raise ValueError("a depth cannot be negative")
        return values

    @model_validator(mode="after")
    def _published_is_fixed(self) -> BenchProfile:
        if self.name == PUBLISHED and not self.has_published_values():
            raise ValueError("the published profile cannot be changed; name a changed one 'custom'")
        return self

    @classmethod
    def published(cls) -> BenchProfile:
        return cls(name=PUBLISHED, **_PUBLISHED_VALUES)

    @classmethod
    def build(cls, **values) -> BenchProfile:
        """A custom profile from user input, as a BenchInputError when a value is bad."""
        try:
            return cls(name=CUSTOM, **{k: v for k, v in values.items() if v is not None})
        except ValueError as exc:
            raise BenchInputError(f"bad benchmark profile: {_first_error(exc)}. "
                                  "Fix the value, or use the published profile.") from None

    def has_published_values(self) -> bool:
        return all(getattr(self, key) == value for key, value in _PUBLISHED_VALUES.items())

    @property
    def effective_runs(self) -> int:
        return self.runs or LLAMA_BENCHY_DEFAULT_RUNS

    def request_count(self) -> int:
        """Measured requests in the suite (warmups emit no progress, so they do not count)."""
        tests = len(self.depth) * len(self.pp) * len(self.tg)
        return tests * sum(self.concurrency) * self.effective_runs

    def max_request_tokens(self) -> int:
        """Context one request needs, before the chat template's own tokens."""
        return max(self.depth) + max(self.pp) + max(self.tg)

    def benchy_args(self) -> list[str]:
        """The llama-benchy options that carry this profile (nothing else)."""
        args = ["--pp", *_strs(self.pp), "--tg", *_strs(self.tg), "--depth", *_strs(self.depth),
                "--concurrency", *_strs(self.concurrency)]
        if self.runs is not None:
            args += ["--runs", str(self.runs)]
        flags = {"--no-warmup": not self.warmup, "--exact-tg": self.exact_tg, "--no-cache": self.no_cache}
        return args + [flag for flag, on in flags.items() if on]

    def describe(self) -> str:
        default_runs = f"runs {LLAMA_BENCHY_DEFAULT_RUNS} (llama-benchy default)"
        runs = f"runs {self.runs}" if self.runs else default_runs
        parts = [f"pp {_join(self.pp)}", f"tg {_join(self.tg)}", f"depth {_join(self.depth)}",
                 f"concurrency {_join(self.concurrency)}", runs]
        parts += [label for label, on in (("no warmup", not self.warmup), ("exact tg", self.exact_tg),
                                          ("no cache", self.no_cache)) if on]
        return f"{self.name}: " + ", ".join(parts)


def _strs(values: tuple[int, ...]) -> list[str]:
    return [str(v) for v in values]


def _join(values: tuple[int, ...]) -> str:
    return "/".join(str(v) for v in values)


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()) if not isinstance(p, int))
        return f"{where}: {first['msg']}" if where else first["msg"]
    return str(exc)
