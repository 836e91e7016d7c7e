"""The function to make faster: the file the agent edits. Its output must not change."""


def pairwise_close(points, radius):
    """The pairs (i, j), i < j, of points closer than `radius`, in sorted order."""
    pairs = []
    for i in range(len(points)):
        for j in range(len(points)):
            if i < j:
                dx = points[i][0] - points[j][0]
                dy = points[i][1] - points[j][1]
                if (dx * dx + dy * dy) ** 0.5 < radius:
                    pairs.append((i, j))
    return sorted(pairs)
