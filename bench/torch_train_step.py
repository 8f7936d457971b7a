"""The PyTorch training step that `anvil bench train` is compared with, on the same machine and shapes.

A transformers model built from the same config.json (random weights, f32 on the CPU or bf16 autocast on a GPU),
seeded random tokens, and the step anvil times: forward, loss, backward, global-norm clipping at 1.0, AdamW.
Prints the median step and one line for scripts:
    TORCH model=NAME batch=B seq=T device=D tok_s=X ms_step=Y

    python3 bench/torch_train_step.py --config configs/models/mamba-130m.json --batch 1 --seq 256 --device cpu
On the CPU, MambaForCausalLM runs its pure-PyTorch path (no mamba_ssm kernels): what a user gets without them.
"""
import argparse
import os
import statistics
import sys
import time

from torch_model import model_from_config


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True, help="a Hugging Face config.json (configs/models/NAME.json)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--threads", type=int, default=os.cpu_count())
    args = p.parse_args()

    torch, model, cfg = model_from_config(args.config, args.threads, "torch_train_step.py")
    model = model.to(args.device).float().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), generator=gen).to(args.device)
    autocast = torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=args.device == "cuda")

    def step():
        with autocast:
            out = model(input_ids=ids, labels=ids, use_cache=False)  # the model shifts the labels itself
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if args.device == "cuda":
            torch.cuda.synchronize()

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    ms = statistics.median(times) * 1e3
    tok_s = args.batch * args.seq / (ms * 1e-3)
    name = os.path.splitext(os.path.basename(args.config))[0]
    versions = f"torch {torch.__version__}, transformers {sys.modules['transformers'].__version__}"
    print(f"{versions}, {args.threads} threads: "
          f"{ms:.1f} ms/step, {tok_s:.0f} tok/s")
    print(f"TORCH model={name} batch={args.batch} seq={args.seq} device={args.device} tok_s={tok_s:.0f} "
          f"ms_step={ms:.2f}")


if __name__ == "__main__":
    main()
