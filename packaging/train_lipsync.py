"""Train the lip-shape model and export it as assets/models/lipsync.onnx.

    python packaging/train_lipsync.py                 # data + training + export
    python packaging/train_lipsync.py --data D.npz   # reuse a generated corpus

The shipped model was made on the lent H200 machine (16 cores, one GPU) with
    python packaging/lipsync_data.py --out /tmp/corpus.npz --piper 1600 --espeak 5000
    python packaging/train_lipsync.py --data /tmp/corpus.npz --steps 8000 --max-train-s 110
(corpus: 13,200 utterances, 15.7 h, 96 s; training: 5,243 steps in 121 s, cut by the
time budget). On 2 CPU cores expect the corpus in ~15 min; pass a --max-train-s that fits.

Needs torch (training only, never the app); data generation needs the app's own
dependencies (piper-tts, the bundled voice). Seeds are fixed: the same command on the
same machine gives the same corpus; the model matches up to GPU nondeterminism.

The model is causal: a 4-frame convolution over log-mel frames, two GRU layers, and one
linear head per lookahead. Head D predicts the mouth 10*D ms before the end of the newest
frame, so it has seen D*10 ms of audio after the instant it describes; all heads share
the network and run in one call (ultra D=1, balanced D=3, premium D=6). The exported
graph is one streaming step: the last 4 frames and the GRU state in, per-head
probabilities over the 15 OVR visemes, per-head openness and the next state out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "packaging"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from pipeline.lipsync_features import N_MELS, POWER_FLOOR  # noqa: E402
from pipeline.visemes import OVR_VISEMES  # noqa: E402

LOOKAHEADS = (1, 3, 6)
CONTEXT = 4
HIDDEN = 160
LAYERS = 2
N_CLASSES = len(OVR_VISEMES)


class LipNet(nn.Module):
    def __init__(self, mean: np.ndarray, std: np.ndarray):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32))
        self.front = nn.Conv1d(N_MELS, HIDDEN, CONTEXT)
        self.gru = nn.GRU(HIDDEN, HIDDEN, LAYERS, batch_first=True, dropout=0.1)
        self.heads = nn.Linear(HIDDEN, len(LOOKAHEADS) * (N_CLASSES + 1))

    def forward(self, feats: torch.Tensor, state: torch.Tensor | None = None):
        """feats [B, T + CONTEXT - 1, N_MELS] → logits [B, T, H, 15], openness [B, T, H], state."""
        x = ((feats - self.mean) / self.std).transpose(1, 2)
        x = torch.nn.functional.gelu(self.front(x)).transpose(1, 2)
        y, state = self.gru(x, state)
        out = self.heads(y).unflatten(-1, (len(LOOKAHEADS), N_CLASSES + 1))
        return out[..., :N_CLASSES], torch.sigmoid(out[..., N_CLASSES]), state


class StreamingStep(nn.Module):
    """One 10 ms step for export: the newest CONTEXT frames and the state in."""

    def __init__(self, net: LipNet):
        super().__init__()
        self.net = net

    def forward(self, feats: torch.Tensor, state: torch.Tensor):
        logits, openness, state = self.net(feats, state)
        return torch.softmax(logits[0, -1], dim=-1), openness[0, -1], state


def load_corpus(path: Path):
    data = np.load(path)
    return (data["features"], data["labels"].astype(np.int64), data["openness"].astype(np.float32),
            data["lengths"])


def train(data_path: Path, out: Path, steps: int, seed: int, batch: int, crop: int,
          max_seconds: float) -> dict:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    feats, labels, openness, lengths = load_corpus(data_path)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    n_val = max(1, len(lengths) // 30)
    # The last utterances are held out; since each text is rendered twice in a row,
    # the cut is kept on an even boundary so no text is in both sets.
    cut = int(starts[len(lengths) - n_val - (len(lengths) - n_val) % 2])
    mean = feats[:cut:7].astype(np.float32).mean(axis=0)
    std = feats[:cut:7].astype(np.float32).std(axis=0) + 1e-3
    counts = np.bincount(labels[:cut], minlength=N_CLASSES).astype(np.float64)
    weights = (counts / counts.sum() + 1e-4) ** -0.4
    weights /= (weights * counts).sum() / counts.sum()

    silence = np.full((CONTEXT - 1 + 600, N_MELS), np.log(POWER_FLOOR), np.float32)
    f_all = torch.tensor(np.concatenate([silence, feats.astype(np.float32)]), device=device)
    pad = len(silence)
    l_all = torch.tensor(np.concatenate([np.zeros(pad, np.int64), labels]), device=device)
    o_all = torch.tensor(np.concatenate([np.zeros(pad, np.float32), openness]), device=device)

    net = LipNet(mean, std).to(device)
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=1e-4)
    ce = nn.CrossEntropyLoss(weight=torch.tensor(weights, dtype=torch.float32, device=device),
                             label_smoothing=0.05)
    offsets = torch.arange(crop, device=device)
    context = torch.arange(crop + CONTEXT - 1, device=device)
    shifts = torch.tensor([d - 1 for d in LOOKAHEADS], device=device)

    def batch_at(begin: torch.Tensor):
        # Output k of a crop is frame begin + k; its head-D target is the label at
        # frame index k + 1 - D on the 10 ms grid (see lipsync_data.frame_labels).
        x = f_all[(begin[:, None] - (CONTEXT - 1) + context[None, :])]
        frame = begin[:, None, None] + offsets[None, :, None] - shifts[None, None, :]
        return x, l_all[frame], o_all[frame]

    t0 = time.time()
    net.train()
    step = 0
    progress = 0.0
    while progress < 1.0:
        # Warm-up then cosine decay over whichever runs out first, the steps or the
        # time budget: the same schedule shape on a slow CPU as on the GPU.
        progress = max(step / steps, (time.time() - t0) / max_seconds)
        for group in opt.param_groups:
            group["lr"] = 3e-3 * min(1.0, progress / 0.05) * 0.5 * (1 + np.cos(np.pi * min(progress, 1.0)))
        begin = torch.tensor(rng.integers(0, cut - crop, batch) + pad, device=device)
        x, y, o = batch_at(begin)
        logits, open_pred, _ = net(x)
        loss = ce(logits.reshape(-1, N_CLASSES), y.reshape(-1)) + 4.0 * torch.mean((open_pred - o) ** 2)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        if step % 500 == 0:
            print(f"step {step} loss {loss.item():.3f} {time.time() - t0:.0f}s", flush=True)
        step += 1

    # Validation as one long stream, on the CPU: cuDNN refuses sequences this long.
    net = net.cpu().eval()
    with torch.no_grad():
        x = f_all[cut + pad - (CONTEXT - 1):].cpu()
        logits, _, _ = net(x[None])
        n = logits.shape[1]
        frame = torch.arange(n)[:, None] + cut + pad - shifts.cpu()[None, :]
        acc = (logits[0].argmax(-1) == l_all.cpu()[frame]).float().mean(0).tolist()
    report = {"train_frames": int(cut), "val_frames": int(len(labels) - cut),
              "val_accuracy": dict(zip(map(str, LOOKAHEADS), acc)), "train_s": time.time() - t0,
              "device": device, "steps": step}
    export(net.cpu(), out, report)
    return report


def export(net: LipNet, out: Path, report: dict) -> None:
    import onnx

    out.parent.mkdir(parents=True, exist_ok=True)
    step = StreamingStep(net).eval()
    feats = torch.zeros(1, CONTEXT, N_MELS)
    state = torch.zeros(LAYERS, 1, HIDDEN)
    torch.onnx.export(step, (feats, state), str(out), input_names=["feats", "state"],
                      output_names=["probs", "openness", "next_state"], opset_version=17,
                      dynamo=False)
    model = onnx.load(str(out))
    meta = {"lookahead_frames": ",".join(map(str, LOOKAHEADS)), "context_frames": str(CONTEXT),
            "state_shape": f"{LAYERS},1,{HIDDEN}", "visemes": ",".join(OVR_VISEMES),
            "training": json.dumps(report)}
    for key, value in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(model, str(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / ".cache" / "lipsync_corpus.npz")
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "models" / "lipsync.onnx")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--piper", type=int, default=1600, help="piper utterances")
    parser.add_argument("--espeak", type=int, default=5000, help="espeak-ng utterances")
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--crop", type=int, default=500, help="frames per training sequence")
    parser.add_argument("--max-train-s", type=float, default=1200.0,
                        help="time budget for the training loop (the schedule fits into it)")
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    if not args.data.exists():
        import os

        from lipsync_data import build

        args.data.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        stats = build(args.data, args.seed, args.piper, args.espeak, args.workers or os.cpu_count() or 2)
        print(json.dumps({"corpus": stats, "data_s": round(time.time() - t0, 1)}), flush=True)
    report = train(args.data, args.out, args.steps, args.seed, args.batch, args.crop,
                   args.max_train_s)
    report["size_bytes"] = args.out.stat().st_size
    print(json.dumps(report))


if __name__ == "__main__":
    main()
