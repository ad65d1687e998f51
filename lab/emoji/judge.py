"""The independent judge: find the emoji in a picture, name each, and pass or fail a prompt.

It never sees a model's samples: a small CNN is trained only on the real Noto and Twemoji
pictures of the bank under augmentation (scale, shift, rotation, a dark outline on half of them, blur
down to 8 px and back as a VQ's loss of detail, brightness / contrast / saturation, a colour cast
of up to 12 % per channel, noise), and its accuracy is measured on
OpenMoji, a style it never saw. Reading a scene: pixels away from the white background are the
foreground; foreground pixels within 2 px are one object (scenes keep emoji 4 px apart); each
object's box, padded square, is resized to `CROP` px and classified; a confidence under
`MIN_CONF` is "unknown". A prompt passes when the objects found are exactly the named emoji
(each as many times as named, nothing else) and, for position, the named relation holds between
their centres (offset >= `RELATION_EVAL_PX` on the axis, which dominates).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from lab.emoji.bank import Bank
from lab.emoji.scenes import BACKGROUND, MODEL_STYLES, Spec, relation_holds
from lab.emoji.vocab import VOCAB

CROP = 16
FG_THRESHOLD = 40         # max channel distance from the background
MIN_AREA = 12             # px; smaller foreground groups are noise
MIN_CONF = 0.5
RELATION_EVAL_PX = 4.0


@dataclass(frozen=True)
class Found:
    label: int            # vocabulary index, -1 = unknown
    conf: float
    cx: float
    cy: float


class JudgeNet(nn.Module):
    """CROP x CROP RGB crop -> (feature [64], logits [len(VOCAB)])."""

    def __init__(self, classes: int = len(VOCAB)) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.GELU(), nn.Conv2d(32, 32, 3, padding=1), nn.GELU(),
            nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.GELU(),
            nn.MaxPool2d(2), nn.Conv2d(64, 64, 3, padding=1), nn.GELU(),
            nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * (CROP // 8) ** 2, 64), nn.GELU())
        self.head = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        feat = self.body(x * 2 - 1)
        return feat, self.head(feat)


def _groups(mask: np.ndarray) -> list[np.ndarray]:
    """Foreground pixels grouped by 8-connectivity of the mask grown by 1 px: [n, 2] (y, x)."""
    grown = mask.copy()
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            grown |= np.roll(np.roll(mask, dy, 0), dx, 1)
    label = np.full(mask.shape, -1, dtype=np.int64)
    groups: list[np.ndarray] = []
    h, w = mask.shape
    for y0, x0 in zip(*np.nonzero(grown), strict=True):
        if label[y0, x0] >= 0:
            continue
        stack, pts, k = [(y0, x0)], [], len(groups)
        label[y0, x0] = k
        while stack:
            y, x = stack.pop()
            pts.append((y, x))
            for ny in (y - 1, y, y + 1):
                for nx in (x - 1, x, x + 1):
                    if 0 <= ny < h and 0 <= nx < w and grown[ny, nx] and label[ny, nx] < 0:
                        label[ny, nx] = k
                        stack.append((ny, nx))
        pts = np.array(pts)
        groups.append(pts[mask[pts[:, 0], pts[:, 1]]])
    return [g for g in groups if len(g) >= MIN_AREA]


def objects_in(image: np.ndarray) -> list[tuple[np.ndarray, float, float]]:
    """uint8 [H, W, 3] -> [(crop float [3, CROP, CROP] in [0, 1], cx, cy)] per object."""
    diff = np.abs(image.astype(np.int16) - np.array(BACKGROUND, dtype=np.int16)).max(-1)
    out = []
    for pts in _groups(diff > FG_THRESHOLD):
        y0, x0 = pts.min(0)
        y1, x1 = pts.max(0) + 1
        side = max(y1 - y0, x1 - x0)
        box = np.empty((side, side, 3), dtype=np.float32)
        box[:] = BACKGROUND
        oy, ox = (side - (y1 - y0)) // 2, (side - (x1 - x0)) // 2
        box[oy:oy + y1 - y0, ox:ox + x1 - x0] = image[y0:y1, x0:x1]
        t = torch.from_numpy(box).permute(2, 0, 1)[None] / 255.0
        crop = F.interpolate(t, size=(CROP, CROP), mode="bilinear", antialias=True,
                             align_corners=False)[0].clamp(0, 1)
        out.append((crop, (x0 + x1) / 2, (y0 + y1) / 2))
    return out


class Judge:
    """A trained JudgeNet and the reading / pass rules above."""

    def __init__(self, net: JudgeNet) -> None:
        self.net = net.eval()

    @torch.no_grad()
    def read(self, image: np.ndarray) -> list[Found]:
        objs = objects_in(image)
        if not objs:
            return []
        _, logits = self.net(torch.stack([o[0] for o in objs]))
        conf, label = logits.softmax(-1).max(-1)
        return [Found(int(lb) if c >= MIN_CONF else -1, float(c), cx, cy)
                for lb, c, (_, cx, cy) in zip(label, conf, objs, strict=True)]

    def passes(self, spec: Spec, image: np.ndarray) -> bool:
        return prompt_passes(spec, self.read(image))

    @torch.no_grad()
    def features(self, images: np.ndarray) -> torch.Tensor:
        """Judge features [M, 64] of every object found in uint8 images [N, H, W, 3]."""
        crops = [o[0] for img in images for o in objects_in(img)]
        if not crops:
            return torch.zeros(0, 64)
        return torch.cat([self.net(torch.stack(crops[i:i + 512]))[0]
                          for i in range(0, len(crops), 512)])

    def save(self, folder: Path, stats: dict) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in self.net.state_dict().items()},
                  str(folder / "judge.safetensors"))
        (folder / "judge.json").write_text(json.dumps(stats, indent=1) + "\n")

    @classmethod
    def load(cls, folder: Path) -> Judge:
        net = JudgeNet()
        net.load_state_dict(load_file(str(folder / "judge.safetensors")))
        return cls(net)


def prompt_passes(spec: Spec, found: list[Found]) -> bool:
    """Exactly the named emoji, as many as named, and the named relation between them."""
    if sorted(f.label for f in found) != sorted(spec.objects):
        return False
    if spec.relation is None:
        return True
    a = next(f for f in found if f.label == spec.objects[0])
    b = next(f for f in found if f.label == spec.objects[1])
    return relation_holds(spec.relation, (a.cx, a.cy), (b.cx, b.cy), RELATION_EVAL_PX)


def frechet_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """Frechet distance between Gaussians fitted to feature sets a [N, D] and b [M, D]."""
    a, b = a.double(), b.double()
    mu = a.mean(0) - b.mean(0)
    ca, cb = torch.cov(a.T), torch.cov(b.T)
    eig = torch.linalg.eigvals(ca @ cb).real.clamp(min=0)
    return float(mu @ mu + ca.trace() + cb.trace() - 2 * eig.sqrt().sum())


def _rgba(full: np.ndarray) -> torch.Tensor:
    """uint8 RGBA [E, H, W, 4] -> float [E, 4, H, W] in [0, 1]."""
    return torch.from_numpy(full).float().permute(0, 3, 1, 2) / 255.0


def _on_background(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """RGBA [B, 4, H, W] -> RGB on the background; half of them get a dark outline 1.5-4 %
    of the side wide (some artwork outlines its emoji: the judge must not depend on it)."""
    b, _, h, _ = x.shape
    alpha = x[:, 3:]
    width = 1 + 2 * int(torch.randint(1, 3, (1,), generator=g)) * h // 64
    grown = F.max_pool2d(alpha, width, stride=1, padding=width // 2)
    ring = (grown - alpha).clamp(0, 1) * (torch.rand(b, 1, 1, 1, generator=g) < 0.5)
    dark = 0.25 * torch.rand(b, 1, 1, 1, generator=g)
    bg = torch.tensor(BACKGROUND, dtype=torch.float32).view(1, 3, 1, 1) / 255.0
    return x[:, :3] * alpha + dark * ring + bg * (1 - alpha - ring).clamp(0, 1)


def augment(pictures: torch.Tensor, idx: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Real RGBA pictures [E, 4, H, W] -> augmented CROP px crops [B, 3, CROP, CROP] of the
    pictures `idx` [B]."""
    b = len(idx)
    x = _on_background(pictures[idx], g)
    u = lambda lo, hi: lo + (hi - lo) * torch.rand(b, generator=g)  # noqa: E731
    ang, scale = u(-0.15, 0.15), u(0.85, 1.12)
    theta = torch.zeros(b, 2, 3)
    theta[:, 0, 0], theta[:, 0, 1] = torch.cos(ang) / scale, -torch.sin(ang) / scale
    theta[:, 1, 0], theta[:, 1, 1] = torch.sin(ang) / scale, torch.cos(ang) / scale
    theta[:, :, 2] = torch.stack([u(-0.08, 0.08), u(-0.08, 0.08)], 1)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    x = F.grid_sample(x - 1, grid, align_corners=False, padding_mode="zeros") + 1  # white pad
    low = int(torch.randint(8, CROP + 1, (1,), generator=g))
    x = F.interpolate(x, size=(low, low), mode="bilinear", antialias=True, align_corners=False)
    x = F.interpolate(x, size=(CROP, CROP), mode="bilinear", align_corners=False)
    grey = x.mean(1, keepdim=True)
    x = grey + (x - grey) * u(0.75, 1.25).view(b, 1, 1, 1)               # saturation
    x = (x - 0.5) * u(0.8, 1.2).view(b, 1, 1, 1) + 0.5 + u(-0.08, 0.08).view(b, 1, 1, 1)
    x = 1 - (1 - x) * (1 + 0.24 * (torch.rand(b, 3, 1, 1, generator=g) - 0.5))  # colour cast
    x = x + 0.03 * torch.randn(x.shape, generator=g)
    return x.clamp(0, 1)


def train_judge(bank: Bank, steps: int = 1500, batch: int = 256, lr: float = 3e-3,
                seed: int = 0, styles: tuple[str, ...] = MODEL_STYLES) -> tuple[Judge, dict]:
    """Train on the bank's pictures of `styles` only (never on model samples)."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    pics = torch.cat([_rgba(bank.full[bank.style_index(s)]) for s in styles])
    classes = torch.arange(len(VOCAB)).repeat(len(styles))
    net = JudgeNet()
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    t0, history = time.time(), []
    for step in range(steps):
        idx = torch.randint(len(pics), (batch,), generator=g)
        x = augment(pics, idx, g)
        _, logits = net(x)
        loss = F.cross_entropy(logits, classes[idx])
        for gr in opt.param_groups:
            gr["lr"] = lr * 0.5 * (1 + math.cos(math.pi * step / steps))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 100 == 0 or step == steps - 1:
            history.append({"step": step, "loss": round(loss.item(), 4)})
            print("judge", history[-1], flush=True)
    stats = {"steps": steps, "batch": batch, "lr": lr, "seed": seed, "styles": list(styles),
             "train_s": round(time.time() - t0, 1), "history": history}
    return Judge(net), stats
