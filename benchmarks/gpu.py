"""GPU benchmark: an 8B-shaped LLaDA (random bf16 weights) at 1024x1024 through the pack's own
``DiMOODenoiser`` and ``sample()``.

Shape: d_model 4096, 32 layers, 32 heads, MLP 12288, vocab 134656 (LLaDA-8B, 8.08 B parameters),
64 x 64 codes with batched CFG (a 64-token prompt row and a 24-token uncond row). Reports:

* ``step``: one full denoiser call (packed rows, the pack's path) and the same rows through the
  padded ``hidden_states`` path, ms and TFLOP/s counting 2 x params x real tokens; one cached
  (ML-Cache) call;
* ``memory``: peak GPU memory for bf16, ML-Cache (a refresh, a cached call, an in-place refresh),
  and for every layout of VARIANT_MODES (per-channel fp8, low-VRAM, ComfyUI fp8 with the fast
  matmul, int8, GGUF Q8_0 and Q4_K_M): its resident weights, peak without and with a lean
  ML-Cache and ms per full call (rows whose loader is not in this build say so instead of
  failing);
* ``end_to_end``: baseline-64, LADR (nano preset, T = 128), ML-Cache (official defaults) and
  LADR + ML-Cache (``MLCacheConfig.ladr()``) wall times, calls, refresh / cached calls and ms per call. Random weights do not give LADR's real
  NFE: ``projected_s`` uses the NFE and refresh / cached counts measured on DiMOO-nano
  (benchmarks/results/ml_cache.json), labelled as such;
* ``syncs``: CUDA host syncs per step, counted with ``torch.cuda.set_sync_debug_mode("warn")``
  (on a CPU run: the dispatch-level ``SyncCounter``), and the ML-Cache's ``host_waits``.

Imports only torch and the parts of ``ladr_core`` that need neither transformers nor diffusers.

    python -m benchmarks.gpu                 # CUDA: writes benchmarks/results/gpu_<device>.json
    python -m benchmarks.gpu --tiny          # CPU smoke test (tiny model, nothing meaningful)
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.common import (
    RESULTS_DIR,
    apply_threads,
    base_parser,
    device_slug,
    result_name,
    strategy_from,
    sync_device,
    write_result,
)
from ladr_core.dimoo import (
    DiMOODenoiser,
    DiMOOIds,
    ImageLayout,
    LLaDAConfig,
    LLaDAModel,
    MLCacheConfig,
    build_prompt_batch,
    cond_text,
)
from ladr_core.policy import PRESETS
from ladr_core.sampling import sample
from testbed.syncs import count_syncs

SHAPE_8B = dict(d_model=4096, n_heads=32, n_layers=32, mlp_hidden_size=12288, vocab_size=134656,
                embedding_size=134656, max_sequence_length=8192, rope_theta=500000.0)
TINY_IDS = DiMOOIds(mask=2, newline=3, image_offset=16, boa=4, eoa=5, boi=6, eoi=7,
                    uncondition=8, codebook_size=64)
SHAPE_TINY = dict(d_model=64, n_heads=4, n_layers=2, mlp_hidden_size=128, vocab_size=80,
                  embedding_size=80, max_sequence_length=512, rope_theta=500000.0)
PROMPT, COND_LEN, UNCOND_LEN, CFG = "benchmark", 64, 24, 4.0
CACHE = MLCacheConfig()
#: weight layouts measured next to bf16 (variants.py): the pack's per-channel fp8, blocks
#: streamed from the CPU, ComfyUI fp8 through torch._scaled_mm (its fast path's kernel),
#: ComfyUI int8 (torch._int_mm), GGUF Q8_0 and Q4_K_M (dequantized per layer at use)
VARIANT_MODES = ("fp8", "low_vram", "comfy_fp8", "int8", "q8_0", "q4_k_m")


class Bench:
    """Model + prompt rows of one size on one device."""

    def __init__(self, tiny: bool, device: torch.device) -> None:
        self.tiny, self.device = tiny, device
        self.ids = TINY_IDS if tiny else DiMOOIds()
        self.config = LLaDAConfig(**(SHAPE_TINY if tiny else SHAPE_8B))
        self.layout = ImageLayout(8, 8) if tiny else ImageLayout(64, 64)
        self.dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
        self.model = build_model(self.config, device, self.dtype)
        self.params = sum(p.numel() for p in self.model.parameters())

    def encode(self, text: str) -> list[int]:
        """Stand-in tokenizer: a fixed-length cond row and a shorter uncond row."""
        n = COND_LEN if text == cond_text(PROMPT) else UNCOND_LEN
        return [(7 * i) % 16 for i in range(n)]

    def denoiser(self, cache: MLCacheConfig | None = None, steps: int = 64) -> DiMOODenoiser:
        batch = build_prompt_batch(self.encode, self.ids, [PROMPT], None, self.layout, True)
        return DiMOODenoiser(self.model, batch, self.ids, CFG, cache, steps if cache else None)

    def state(self, frac: float, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        n = self.layout.n_codes
        masked = torch.rand(1, n, generator=g) < frac
        tokens = torch.randint(0, self.ids.codebook_size, (1, n), generator=g)
        return tokens.masked_fill(masked, 0).to(self.device), masked.to(self.device)


def build_model(config: LLaDAConfig, device: torch.device, dtype: torch.dtype) -> LLaDAModel:
    """Random N(0, 0.02) weights allocated once, directly in ``dtype`` on ``device``."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("meta"):
            model = LLaDAModel(config, init_std=None)
    finally:
        torch.set_default_dtype(previous)
    model.to_empty(device=device)
    torch.manual_seed(0)
    model.reset_parameters(0.02)
    return model.eval().requires_grad_(False)


def timed(fn: Callable[[], Any], device: torch.device, reps: int) -> float:
    """Median seconds of ``reps`` calls after one warm-up call."""
    fn()
    sync_device(device)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync_device(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def step_rows(b: Bench, reps: int) -> dict[str, Any]:
    """One full call (packed), the padded path, and one cached call."""
    den = b.denoiser()
    tokens, masked = b.state(0.5)
    packed_s = timed(lambda: den(tokens, masked), b.device, reps)
    seq = den.input_ids  # left-padded rows, every code slot masked

    def padded() -> None:
        with torch.no_grad():
            hidden, _ = b.model.hidden_states(seq, den.attention_mask)
            b.model.project(hidden[:, -b.layout.length:], rows=den.codebook)

    padded_s = timed(padded, b.device, reps)
    cached = b.denoiser(MLCacheConfig(warmup_ratio=0.0, refresh_interval=10 ** 6))
    cached(tokens, masked)  # the refresh that fills the cache
    cached_s = timed(lambda: cached(tokens, masked), b.device, reps)
    flops = 2.0 * b.params * den.real_tokens
    return {"real_tokens": den.real_tokens, "padded_tokens": int(den.attention_mask.numel()),
            "params": b.params, "packed_ms": packed_s * 1e3, "padded_ms": padded_s * 1e3,
            "cached_call_ms": cached_s * 1e3, "packed_tflops": flops / packed_s / 1e12,
            "padded_tflops": flops / padded_s / 1e12}


def peak_bytes(b: Bench, run: Callable[[], Any]) -> int:
    """Peak bytes allocated while ``run`` runs: CUDA's allocator peak (weights included) on a
    GPU; on a CPU the region's own allocations (``LiveBytes``, weights excluded)."""
    if b.device.type != "cuda":
        from testbed.live_bytes import LiveBytes

        with LiveBytes() as mem:
            run()
        return mem.peak
    sync_device(b.device)
    torch.cuda.reset_peak_memory_stats(b.device)
    run()
    sync_device(b.device)
    return torch.cuda.max_memory_allocated(b.device)


def _sample(b: Bench, den: DiMOODenoiser, steps: int, strategy: str = "baseline",
            policy: Any = None) -> Any:
    gen = torch.Generator(device=b.device).manual_seed(0)
    return sample(den, shape=(1, b.layout.h, b.layout.w), steps=steps,
                  strategy=strategy_from(strategy, policy), generator=gen, device=b.device)


def one_call_ms(b: Bench) -> float:
    """Median ms of one full denoiser call (half the image masked) on ``b.model``."""
    den = b.denoiser()
    tokens, masked = b.state(0.5)
    return timed(lambda: den(tokens, masked), b.device, 3) * 1e3


def memory_rows(b: Bench) -> dict[str, Any]:
    """Peak memory per mode; fp8 / low-VRAM come from loaders that may not be in this build."""
    gib = 2.0 ** 30
    rows: dict[str, Any] = {}
    resident = torch.cuda.memory_allocated(b.device) if b.device.type == "cuda" else None
    plain = peak_bytes(b, lambda: _sample(b, b.denoiser(), 2))
    call_ms = one_call_ms(b)  # next to fp8 / low-VRAM
    rows["bf16"] = {"peak_gib": plain / gib, "call_ms": call_ms,
                    "resident_gib": resident / gib if resident is not None else None}
    lean = MLCacheConfig(warmup_ratio=0.0, refresh_interval=2)
    holder: dict[str, DiMOODenoiser] = {}

    def cached_run() -> None:
        holder["den"] = b.denoiser(lean, steps=4)
        _sample(b, holder["den"], 4)

    peak = peak_bytes(b, cached_run)
    caches = holder["den"].caches
    kept = caches.nbytes() if caches is not None else 0
    holder.clear()  # the denoiser holds the bf16 model, which the variants below must not see
    rows["ml_cache"] = {"peak_gib": peak / gib, "cache_gib": kept / gib,
                        "extra_over_cache": (peak - plain) / kept if kept else None}
    for mode in VARIANT_MODES:
        rows[mode] = variant_peak(b, mode)
    return rows


def variant_peak(b: Bench, mode: str) -> dict[str, Any]:
    """Peak of two sampled steps, the same with a lean ML-Cache, and ms per full call for a
    layout of ``testbed.variants.build_variant(config, device, mode)`` (VARIANT_MODES)
    when this build has it. Runs last: the bf16 model is released first."""
    try:
        from testbed import variants

        build = variants.build_variant
    except (ImportError, AttributeError) as exc:
        return {"peak_gib": None, "status": f"unavailable in this build ({exc})"}
    b.model = None  # type: ignore[assignment]
    left = None
    if b.device.type == "cuda":
        torch.cuda.empty_cache()
        left = torch.cuda.memory_allocated(b.device)  # ~0 unless something still holds a model
    try:
        b.model = build(b.config, b.device, mode)
        resident = torch.cuda.memory_allocated(b.device) if b.device.type == "cuda" else None
        peak = peak_bytes(b, lambda: _sample(b, b.denoiser(), 2))
        lean = MLCacheConfig(warmup_ratio=0.0, refresh_interval=2)
        cache_peak = peak_bytes(b, lambda: _sample(b, b.denoiser(lean, steps=4), 4))
        call_ms = one_call_ms(b)
    except (NotImplementedError, TypeError, ValueError, RuntimeError) as exc:
        return {"peak_gib": None, "status": f"unavailable in this build ({exc})"}
    finally:
        b.model = None  # type: ignore[assignment]
    gib = 2.0 ** 30
    return {"peak_gib": peak / gib, "peak_ml_cache_gib": cache_peak / gib,
            "resident_gib": resident / gib if resident else None,
            "allocated_before_build_gib": left / gib if left is not None else None,
            "call_ms": call_ms, "status": "measured"}


def nano_counts() -> dict[str, Any]:
    """NFE and refresh / cached calls per image measured on DiMOO-nano (ml_cache.json)."""
    path = RESULTS_DIR / "ml_cache.json"
    try:
        rows = json.loads(path.read_text())["rows"]
    except (OSError, KeyError, ValueError):
        return {}
    names = {"baseline": "baseline-64", "baseline+cache": "mlcache", "ladr-nano": "ladr-nano",
             "ladr-nano+cache-ladr": "ladr-nano+mlcache"}
    return {names[r["case"]]: r for r in rows if r.get("case") in names and "refresh_calls" in r}


def e2e_cases() -> dict[str, tuple[str, int, Any, MLCacheConfig | None]]:
    nano_t, nano = PRESETS["nano"].steps, PRESETS["nano"].policy
    return {"baseline-64": ("baseline", 64, None, None),
            "mlcache": ("baseline", 64, None, CACHE),
            "ladr-nano": ("ladr", nano_t, nano, None),
            "ladr-nano+mlcache": ("ladr", nano_t, nano, MLCacheConfig.ladr())}


def end_to_end(b: Bench, step: dict[str, Any]) -> list[dict[str, Any]]:
    """Wall time of whole sample() runs + a projection with nano's call counts."""
    nano = nano_counts()
    rows = []
    for name, (strategy, steps, policy, cache) in e2e_cases().items():
        den = b.denoiser(cache, steps)
        sync_device(b.device)
        t0 = time.perf_counter()
        res = _sample(b, den, steps, strategy, policy)
        sync_device(b.device)
        wall = time.perf_counter() - t0
        row = {"case": name, "steps": steps, "calls": res.nfe, "wall_s": wall,
               "ms_per_call": wall / res.nfe * 1e3, "refresh_calls": den.stats.refresh_steps,
               "cached_calls": den.stats.cached_steps}
        ref = nano.get(name)
        if ref is not None:
            full = ref["refresh_calls"] if cache else ref["nfe"]
            cached = ref["cached_calls"] if cache else 0
            row["nano_nfe"] = ref["nfe"]
            row["projected_s"] = (full * step["packed_ms"] + cached * step["cached_call_ms"]) / 1e3
            row["projected_note"] = (
                "calls from DiMOO-nano (random weights give no real NFE); a cached call is timed "
                "with the official cache, which recomputes less than MLCacheConfig.ladr() (every "
                "still-masked slot): for the ladr cache a lower bound, see projected_tf_s")
            row["nano_token_forwards"] = ref.get("token_forwards")
        rows.append(row)
    base = next((r for r in rows if r["case"] == "baseline-64"), None)
    for row in rows:  # baseline-64's wall time x this case's share of nano's token-forwards
        if base and base.get("nano_token_forwards") and row.get("nano_token_forwards"):
            row["projected_tf_s"] = (base["wall_s"] * row["nano_token_forwards"]
                                     / base["nano_token_forwards"])
    return rows


def sync_rows(b: Bench, steps: int) -> list[dict[str, Any]]:
    rows = []
    for name, (strategy, _, policy, cache) in e2e_cases().items():
        den = b.denoiser(cache, steps)
        out: list[Any] = []
        total, _ = count_syncs(lambda den=den, s=strategy, p=policy, out=out: out.append(
            _sample(b, den, steps, s, p)), b.device)
        # host_waits: ML-Cache count reads that found their copy unfinished (hostlag.py); an
        # event wait may escape the sync debug mode, so it is reported on its own
        rows.append({"case": name, "steps": out[0].steps, "syncs": total,
                     "per_step": total / max(out[0].steps, 1),
                     "host_waits": den.stats.host_waits})
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    parser.add_argument("--skip-e2e", action="store_true", help="skip the whole-run timings")
    parser.add_argument("--only", choices=("memory",), default=None,
                        help="only the memory rows (writes gpu_<device>_memory.json)")
    args = parser.parse_args(argv)
    apply_threads(args)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type != "cuda" and not args.tiny:
        parser.error("the 8B-shaped run needs a CUDA device; use --tiny for the CPU smoke test")
    b = Bench(args.tiny, device)
    reps = args.reps or (1 if args.tiny else 5)
    result: dict[str, Any] = {"device": device_slug(device), "tiny": args.tiny,
                              "config": b.config.to_dict(), "grid": [b.layout.h, b.layout.w],
                              "dtype": str(b.dtype)}
    if args.only == "memory":
        result["memory"] = memory_rows(b)
        print(json.dumps(result["memory"], indent=1))
        return save(result, args.out, device, args.tiny, "_memory")
    result["step"] = step_rows(b, reps)
    print(json.dumps(result["step"], indent=1))
    result["syncs"] = sync_rows(b, 4 if args.tiny else 8)
    result["end_to_end"] = [] if args.skip_e2e else end_to_end(b, result["step"])
    for row in result["syncs"] + result["end_to_end"]:
        print(row)
    result["memory"] = memory_rows(b)  # last: the fp8 / low-VRAM rows release the bf16 model
    print(json.dumps(result["memory"], indent=1))
    return save(result, args.out, device, args.tiny)


def save(result: dict[str, Any], out: Any, device: torch.device, tiny: bool,
         suffix: str = "") -> dict[str, Any]:
    """Real runs -> gpu_<device>.json; a tiny run only to an explicit --out, never as a result."""
    if tiny and out == RESULTS_DIR:
        print("tiny run: not written (pass --out DIR to keep it)")
        return result
    name = "gpu" if tiny else result_name("gpu", device) + suffix
    print(f"wrote {write_result(name, result, out)}")
    return result


if __name__ == "__main__":
    main()
