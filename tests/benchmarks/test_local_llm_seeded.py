"""The seeded server wrapper makes a request's seed reach the model before llama-cpp's function-calling
handler, which drops it, runs; the wrapper is applied once however often it is called."""

import random
import sys
from types import ModuleType

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import local_llm_seeded


class FakeLlama:
    """What the stock handler does with a request that carries no seed of its own: derive the next
    seed from the model's current one, then sample with it."""

    def __init__(self) -> None:
        self._seed = 0

    def set_seed(self, seed: int) -> None:
        self._seed = seed

    def draw(self) -> int:
        self.set_seed(random.Random(self._seed).randint(0, 2**32))
        return random.Random(self._seed).randint(0, 10**9)


def stock_handler(llama: FakeLlama, messages: list[str], **kwargs: object) -> int:
    return llama.draw()  # a `seed` in kwargs is ignored, as in llama-cpp-python 0.3.36


def fake_chat_format() -> ModuleType:
    module = ModuleType("llama_chat_format")
    module.chatml_function_calling = stock_handler  # type: ignore[attr-defined]
    return module


def test_without_the_fix_the_same_seed_on_a_warm_server_gives_another_draw():
    llama = FakeLlama()
    first = stock_handler(llama=llama, messages=["hi"], seed=1)
    assert stock_handler(llama=llama, messages=["hi"], seed=1) != first


def test_with_the_fix_a_requests_seed_decides_its_draw_whatever_came_before():
    chat_format = fake_chat_format()
    local_llm_seeded.honour_seed(chat_format)
    handler = chat_format.chatml_function_calling
    local_llm_seeded.honour_seed(chat_format)
    assert chat_format.chatml_function_calling is handler  # not wrapped twice
    llama = FakeLlama()
    first = handler(llama=llama, messages=["hi"], seed=1)
    other = handler(llama=llama, messages=["hi"], seed=2)
    assert handler(llama=llama, messages=["hi"], seed=1) == first
    assert handler(FakeLlama(), ["hi"], seed=1) == first  # positional llama, fresh server
    assert other != first
