"""A small MLP on the digits, in numpy, trained for a fixed time budget (prepare.py): the file the
agent edits. Change anything here (architecture, initialisation, optimiser, schedule, batch size);
keep calling prepare.save on the validation probabilities at the end.
"""

import json
import os

import numpy as np
import prepare

params = json.loads(os.environ.get("AUTORESEARCH_PARAMS", "{}"))
rng = np.random.default_rng(int(os.environ.get("AUTORESEARCH_SEED", "0")))
X_train, y_train, X_val = prepare.load()

HIDDEN = 32
LEARNING_RATE = 0.05
BATCH = 32

W1 = rng.normal(0, 0.1, (64, HIDDEN))
b1 = np.zeros(HIDDEN)
W2 = rng.normal(0, 0.1, (HIDDEN, 10))
b2 = np.zeros(10)


def forward(X):
    h = np.tanh(X @ W1 + b1)
    logits = h @ W2 + b2
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return h, p / p.sum(axis=1, keepdims=True)


budget = prepare.Budget()
steps = 0
while budget.left():
    batch = rng.integers(0, len(y_train), BATCH)
    X, y = X_train[batch], y_train[batch]
    h, p = forward(X)
    grad = p.copy()
    grad[np.arange(BATCH), y] -= 1
    grad /= BATCH
    gW2, gb2 = h.T @ grad, grad.sum(axis=0)
    gh = grad @ W2.T * (1 - h**2)
    gW1, gb1 = X.T @ gh, gh.sum(axis=0)
    W1 -= LEARNING_RATE * gW1
    b1 -= LEARNING_RATE * gb1
    W2 -= LEARNING_RATE * gW2
    b2 -= LEARNING_RATE * gb2
    steps += 1

print(f"steps: {steps}")
prepare.save(forward(X_val)[1])
