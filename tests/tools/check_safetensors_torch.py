#!/usr/bin/python3
"""Checks that hogwild checkpoints and PyTorch understand each other (Debian's torch 1.13).

    /usr/bin/python3 tests/tools/check_safetensors_torch.py --check ckpt.safetensors
        parses a hogwild checkpoint with plain json + struct (or the safetensors package when it
        is importable), loads it into the mnist_hogwild Net with load_state_dict(strict=True),
        runs one forward pass and prints OK.
    ... --roundtrip out.safetensors   (with --check) writes the loaded Net's state_dict back
    ... --write out.safetensors       writes a freshly initialised Net (torch.manual_seed(--seed))

Files are written with safetensors.torch.save_file when the package is importable, otherwise by
the same rules by hand: tensors sorted by name, compact JSON header padded with spaces to a
multiple of 8, no __metadata__. Exit status 77 when torch is not importable.
"""
import argparse
import json
import os
import struct
import sys

try:
    import torch
except ImportError as e:  # pragma: no cover
    print("SKIP: torch is not importable by %s: %s" % (sys.executable, e))
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
from torch_nets import Net  # noqa: E402  (the PyTorch twin of models/lenet.model)

try:
    import safetensors.torch as st
except ImportError:
    st = None




def fail(path, what):
    raise SystemExit("FAIL: %s: %s" % (path, what))


def read_plain(path):
    """Parses a safetensors file with json + struct only, checking what hogwild promises."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        fail(path, "cannot read it: %s" % e.strerror)
    if len(blob) < 8:
        fail(path, "shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        fail(path, "header length %d runs past the end of the file" % n)
    if (8 + n) % 8 != 0:
        fail(path, "data section not 8-aligned (header length %d)" % n)
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    data = blob[8 + n:]
    tensors, at = {}, 0
    for name, entry in header.items():  # hogwild writes them in the model's order, back to back
        if entry["dtype"] != "F32":
            fail(path, "%s has dtype %s" % (name, entry["dtype"]))
        begin, end = entry["data_offsets"]
        numel = 1
        for d in entry["shape"]:
            numel *= d
        if begin != at or end - begin != 4 * numel or end > len(data):
            fail(path, "%s: offsets %s do not follow on (at %d) or do not match shape %s"
                 % (name, entry["data_offsets"], at, entry["shape"]))
        at = end
        values = struct.unpack("<%df" % numel, data[begin:end])
        tensors[name] = torch.tensor(values, dtype=torch.float32).reshape(entry["shape"])
    if at != len(data):
        fail(path, "%d data bytes after the last tensor" % (len(data) - at))
    return metadata, tensors


def write_file(path, tensors):
    tensors = {k: v.detach().contiguous() for k, v in tensors.items()}
    if st is not None:
        st.save_file(tensors, path)
        return
    header, chunks, at = {}, [], 0
    for name in sorted(tensors):
        raw = struct.pack("<%df" % tensors[name].numel(), *tensors[name].flatten().tolist())
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [at, at + len(raw)]}
        chunks.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", metavar="FILE", help="a hogwild checkpoint to load into the torch Net")
    ap.add_argument("--roundtrip", metavar="OUT", help="with --check: write the loaded Net back to OUT")
    ap.add_argument("--write", metavar="OUT", help="write a freshly initialised Net to OUT")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not (args.check or args.write) or (args.roundtrip and not args.check):
        ap.error("give --check FILE [--roundtrip OUT] and/or --write OUT")
    torch.set_num_threads(1)
    reader = "json+struct"
    if args.check:
        metadata, tensors = read_plain(args.check)
        if st is not None:  # cross-check with the reference implementation
            reader = "json+struct and safetensors %s" % getattr(__import__("safetensors"), "__version__", "?")
            ref = st.load_file(args.check)
            for k in tensors:
                if not torch.equal(ref[k], tensors[k]):
                    fail(args.check, "safetensors reads %s differently" % k)
        # The optimizer's state beside the weights (optim.velocity.*) is hogwild's, not the Net's.
        tensors = {k: v for k, v in tensors.items() if not k.startswith("optim.")}
        net = Net()
        net.load_state_dict(tensors, strict=True)
        for name, value in net.state_dict().items():
            if value.numpy().tobytes() != tensors[name].numpy().tobytes():
                fail(args.check, "%s changed on load_state_dict" % name)
        net.eval()
        with torch.no_grad():
            out = net(torch.zeros(2, 1, 28, 28))
        if out.shape != (2, 10) or not torch.isfinite(out).all():
            fail(args.check, "forward pass gave %s" % out)
        meta = ", ".join("%s=%s" % (k, metadata[k]) for k in ("format", "epoch", "samples_seen", "seed")
                         if k in metadata)
        print("OK: %s (%s): %d tensors loaded into the mnist_hogwild Net with load_state_dict(strict=True); "
              "metadata: %s; model text: %d characters"
              % (args.check, reader, len(tensors), meta or "none", len(metadata.get("hogwild_model", ""))))
        if args.roundtrip:
            write_file(args.roundtrip, net.state_dict())
            print("OK: wrote %s from torch (%s)" % (args.roundtrip, "safetensors" if st else "json+struct"))
    if args.write:
        torch.manual_seed(args.seed)
        write_file(args.write, Net().state_dict())
        print("OK: wrote a fresh Net (seed %d) to %s" % (args.seed, args.write))


if __name__ == "__main__":
    main()
