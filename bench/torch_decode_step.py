"""The PyTorch decode that `anvil bench decode` is compared with on the CPU: saves a random-weight model built from
a config.json (for anvil to load), then times transformers' greedy generate on the same machine, batch 1.

    python3 bench/torch_decode_step.py --config configs/models/llama-3.2-1b.json --out /tmp/llama1b --tokens 32
Prints one line for scripts:  TORCH_DECODE model=NAME dtype=D prompt=P tokens=N ms_token=X
"""
import argparse
import os
import sys
import time

from torch_model import model_from_config


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True, help="a Hugging Face config.json (configs/models/NAME.json)")
    p.add_argument("--out", required=True, help="where the random-weight checkpoint is saved (safetensors)")
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    p.add_argument("--prompt-len", type=int, default=1)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    args = p.parse_args()

    torch, model, cfg = model_from_config(args.config, args.threads, "torch_decode_step.py")
    dtype = torch.float32 if args.dtype == "f32" else torch.bfloat16
    model = model.to(dtype).eval()
    t = time.time()
    model.save_pretrained(args.out, safe_serialization=True)
    print(f"saved {args.out} in {time.time() - t:.1f} s", flush=True)

    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (1, args.prompt_len), generator=gen)
    kw = dict(do_sample=False, pad_token_id=0)
    with torch.no_grad():
        model.generate(ids, max_new_tokens=2, min_new_tokens=2, **kw)  # warm-up
        # The decode steps alone: a run of N + 1 new tokens less a run of 1 (the prefill and the first token).
        t = time.perf_counter()
        model.generate(ids, max_new_tokens=1, min_new_tokens=1, **kw)
        one = time.perf_counter() - t
        t = time.perf_counter()
        model.generate(ids, max_new_tokens=args.tokens + 1, min_new_tokens=args.tokens + 1, **kw)
        many = time.perf_counter() - t
    ms = (many - one) / args.tokens * 1e3
    name = os.path.splitext(os.path.basename(args.config))[0]
    versions = f"torch {torch.__version__}, transformers {sys.modules['transformers'].__version__}"
    print(f"{versions}, {args.threads} threads, "
          f"dynamic cache, eager: {ms:.1f} ms/token")
    print(f"TORCH_DECODE model={name} dtype={args.dtype} prompt={args.prompt_len} tokens={args.tokens} "
          f"ms_token={ms:.2f}")


if __name__ == "__main__":
    main()
