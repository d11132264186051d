"""SciPy's cKDTree.query_ball_point on the same points as `player nns`:
builds the tree and finds every point's neighbours within the radius (lists,
unsorted, all cores), REPEATS times; prints one JSON object with the seconds
of each repeat and the total neighbour count (the point itself excluded).

Usage: python3 scipy_nns.py POINTS.f32 RADIUS REPEATS
"""
import json
import sys
import time

import numpy as np
from scipy.spatial import cKDTree


def main():
    path, radius, repeats = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    points = np.fromfile(path, dtype="<f4").reshape(-1, 3).astype(np.float64)
    seconds = []
    total = 0
    for _ in range(repeats):
        start = time.perf_counter()
        tree = cKDTree(points)
        lists = tree.query_ball_point(points, radius, workers=-1, return_sorted=False)
        seconds.append(time.perf_counter() - start)
        total = sum(len(l) for l in lists) - len(points)
        del lists, tree
    print(json.dumps({"seconds": seconds, "neighbours": total}))


if __name__ == "__main__":
    main()
