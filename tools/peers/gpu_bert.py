"""Peer benchmark: PyTorch eager training HF transformers' BERT masked-LM on one CUDA GPU.

  python3 tools/peers/gpu_bert.py --precision bf16 --micro 64 --steps 6 [--attention sdpa|eager]

The model is transformers' BertForMaskedLM built from a BertConfig of troupe's bert-base shape
(--layers 12 --hidden 768 --heads 12, FFN 4x hidden, vocab 30522, seq 128, dropout 0.1), randomly
initialised; the MLM head runs on the masked positions only, as troupe's does (the encoder's
output gathered at them, then the transform and the tied decoder), cross-entropy, AdamW (lr 1e-4,
PyTorch's default CUDA implementation). --precision bf16 runs forward and backward under
torch.autocast("cuda", bfloat16); fp16 under float16 autocast with torch.amp.GradScaler (dynamic
loss scaling); fp32 without autocast. --attention picks transformers' attention kernel:
"sdpa" (its default, PyTorch's scaled_dot_product_attention: flash attention) or "eager"
(matmul, softmax, matmul, as troupe's model computes it). Tokens are random (speed only); 15% of
positions are masked; one window is one micro-batch (no accumulation). The gradient is clipped to
a global norm of --max-grad-norm (default 1.0, as HF Trainer and troupe's bert-base config do;
the figures recorded in docs/gpu.md up to 2026-11-27 ran the peer without it).

What is timed: two warm-up steps, then --steps steps between torch.cuda.synchronize() calls;
samples/s = steps x micro / seconds. MFU counts matrix-multiply FLOPs per token as troupe's
`bench train` does (compute/training_flops.hpp): 6(4H^2 + 2HI) + 12SH per layer plus the head at
the masked share, against --peak-tflops (default: the H100/H200 SXM dense peak for 16-bit, 989.4).

How it checks itself: every step's loss must be finite and the loss must have moved. Prints one
JSON line; exit status 1 if the check fails.
"""
import argparse, json, math, sys, time
import torch
from transformers import BertConfig, BertForMaskedLM


def flops_per_token(a, masked_fraction):
    h, i, s, v = a.hidden, 4 * a.hidden, a.seq, a.vocab
    return a.layers * (6 * (4 * h * h + 2 * h * i) + 12 * s * h) + masked_fraction * 6 * (h * h + h * v)


def main():
    p = argparse.ArgumentParser()
    for name, default in dict(layers=12, hidden=768, heads=12, seq=128, vocab=30522, micro=64, steps=6).items():
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--precision", choices=["bf16", "fp16", "fp32"], default="bf16")
    p.add_argument("--attention", choices=["sdpa", "eager"], default="sdpa")
    p.add_argument("--peak-tflops", type=float, default=989.4)
    p.add_argument("--max-grad-norm", type=float, default=1.0,
                   help="clip the gradient's global norm (0: off); 1.0 is HF Trainer's default and "
                        "configs/bert-base.json's gradient_clipping")
    a = p.parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda:0")
    config = BertConfig(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                        num_attention_heads=a.heads, intermediate_size=4 * a.hidden,
                        max_position_embeddings=512)
    model = BertForMaskedLM._from_config(config, attn_implementation=a.attention).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.precision]
    scaler = torch.amp.GradScaler("cuda", enabled=a.precision == "fp16")
    tokens = torch.Generator(device=device).manual_seed(1000)
    losses, masked_tokens = [], 0

    def step():
        nonlocal masked_tokens
        ids = torch.randint(0, a.vocab, (a.micro, a.seq), generator=tokens, device=device)
        masked = torch.rand((a.micro, a.seq), generator=tokens, device=device) < 0.15
        with torch.autocast("cuda", dtype=dtype, enabled=a.precision != "fp32"):
            hidden = model.bert(input_ids=ids).last_hidden_state
            logits = model.cls(hidden[masked])
            loss = torch.nn.functional.cross_entropy(logits.float(), ids[masked])
        scaler.scale(loss).backward()
        if a.max_grad_norm > 0:
            scaler.unscale_(optimizer)  # a no-op without fp16's scaler
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.max_grad_norm)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.detach())
        masked_tokens += int(masked.sum())

    for _ in range(2):
        step()
    torch.cuda.synchronize()
    masked_tokens = 0
    start = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    values = [float(x) for x in losses]
    correct = all(math.isfinite(x) for x in values) and values[-1] != values[0]
    samples = a.steps * a.micro
    tokens_per_s = samples * a.seq / seconds
    achieved = flops_per_token(a, masked_tokens / (samples * a.seq)) * tokens_per_s / 1e12
    print(json.dumps({"peer": "pytorch-eager-hf-bert", "torch": torch.__version__,
                      "device": torch.cuda.get_device_name(0), "precision": a.precision,
                      "attention": a.attention, "max_grad_norm": a.max_grad_norm, "layers": a.layers,
                      "hidden": a.hidden, "seq": a.seq,
                      "micro": a.micro, "timed_steps": a.steps, "seconds": round(seconds, 4),
                      "samples_per_s": round(samples / seconds, 2), "tokens_per_s": round(tokens_per_s, 1),
                      "achieved_tflops": round(achieved, 1), "mfu": round(achieved / a.peak_tflops, 4),
                      "first_loss": round(values[0], 4), "last_loss": round(values[-1], 4),
                      "correct": correct}), flush=True)
    sys.exit(0 if correct else 1)


if __name__ == "__main__":
    main()
