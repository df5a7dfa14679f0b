#!/usr/bin/env python3
"""A second anchor for the GPU session (issue 8): PyTorch + transformers' Qwen3 on the same shapes
as bench/device/run.sh's memra benchmarks, bf16, random weights, batch 1. pp<N>: one forward over
N prompt tokens; tg<N>: N single-token forwards through the model's KV cache (a plain loop, no
generate(): its sampling machinery is not what is being compared). Prints one JSON line.

    python3 bench/device/torch-qwen3.py --hidden 4096 --heads 32 --kv-heads 8 --ffn 12288 --layers 8 --full-layers 36

Not run here (no torch on the development machine): written for the device, where a failure only
costs its own step of run.sh.
"""
import argparse
import json
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--hidden", type=int, default=1024)
parser.add_argument("--heads", type=int, default=16)
parser.add_argument("--kv-heads", type=int, default=8)
parser.add_argument("--head-dim", type=int, default=128)
parser.add_argument("--ffn", type=int, default=3072)
parser.add_argument("--layers", type=int, default=28)
parser.add_argument("--full-layers", type=int, default=0)
parser.add_argument("--vocab", type=int, default=151936)
parser.add_argument("--prompt", type=int, default=512)
parser.add_argument("--decode", type=int, default=128)
parser.add_argument("--runs", type=int, default=2)
args = parser.parse_args()

from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402  (transformers >= 4.51)

config = Qwen3Config(
    vocab_size=args.vocab,
    hidden_size=args.hidden,
    intermediate_size=args.ffn,
    num_hidden_layers=args.layers,
    num_attention_heads=args.heads,
    num_key_value_heads=args.kv_heads,
    head_dim=args.head_dim,
    max_position_embeddings=args.prompt + args.decode + 16,
    tie_word_embeddings=True,
    torch_dtype=torch.bfloat16,
)
torch.manual_seed(0)
with torch.device("cuda"):
    model = Qwen3ForCausalLM(config).to(torch.bfloat16).eval()

generator = torch.Generator(device="cpu").manual_seed(12345)
prompt = torch.randint(1000, 51000, (1, args.prompt), generator=generator).cuda()


@torch.inference_mode()
def run_once():
    torch.cuda.synchronize()
    started = time.perf_counter()
    output = model(input_ids=prompt, use_cache=True)
    token = output.logits[:, -1].argmax(-1, keepdim=True)
    torch.cuda.synchronize()
    prefill = time.perf_counter() - started
    cache = output.past_key_values
    started = time.perf_counter()
    for _ in range(args.decode):
        output = model(input_ids=token, past_key_values=cache, use_cache=True)
        cache = output.past_key_values
        token = output.logits[:, -1].argmax(-1, keepdim=True)
    torch.cuda.synchronize()
    return prefill, time.perf_counter() - started


run_once()  # warm-up: kernels, allocator
best_prefill, best_decode = float("inf"), float("inf")
for _ in range(args.runs):
    prefill, decode = run_once()
    best_prefill, best_decode = min(best_prefill, prefill), min(best_decode, decode)
full_layers = args.full_layers or args.layers
scale = args.layers / full_layers
result = {
    "engine": "pytorch-transformers",
    "torch": torch.__version__,
    "device": torch.cuda.get_device_name(),
    "dtype": "bf16",
    "layers": args.layers,
    "fullLayers": full_layers,
    f"pp{args.prompt}": args.prompt / best_prefill,
    f"tg{args.decode}": args.decode / best_decode,
    f"pp{args.prompt}Scaled": args.prompt / best_prefill * scale,
    f"tg{args.decode}Scaled": args.decode / best_decode * scale,
}
print(json.dumps(result))
