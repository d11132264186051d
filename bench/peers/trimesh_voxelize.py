"""Peer for `bake mesh`: trimesh's voxelizer on the same mesh at the same pitch.

Prints one JSON object: median seconds of `mesh.voxelized(pitch).fill()` (load
included, as Pellet's timing includes its load), filled voxel count, and, when
Pellet's particle centres are given, the intersection over union of the two
occupancies (a Pellet particle counts as shared when its centre lies in a
voxel trimesh filled; both grids have the same pitch).
"""
import argparse
import json
import statistics
import time

import numpy as np
import trimesh


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mesh", required=True)
    ap.add_argument("--pitch", type=float, required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--points", help="CSV x,y,z of Pellet's particle centres")
    args = ap.parse_args()

    times = []
    grid = None
    for _ in range(max(1, args.runs)):
        start = time.perf_counter()
        mesh = trimesh.load(args.mesh, force="mesh")
        grid = mesh.voxelized(args.pitch).fill()
        times.append(time.perf_counter() - start)
    filled = int(grid.filled_count)
    out = {
        "median_s": statistics.median(times),
        "samples": len(times),
        "filled": filled,
        "trimesh": trimesh.__version__,
    }
    if args.points:
        points = np.loadtxt(args.points, delimiter=",", ndmin=2)
        shared = int(np.count_nonzero(grid.is_filled(points)))
        out["pellet"] = int(len(points))
        out["shared"] = shared
        out["iou"] = shared / (len(points) + filled - shared)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
