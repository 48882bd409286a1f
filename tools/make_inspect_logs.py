"""Write the Inspect AI logs that tests/unit/io/formats/test_inspect_logs.py reads, with Inspect's own
code: ``inspect_ai.eval`` over three local tasks, a model API of our own registered with
``@modelapi`` (Inspect's mock model fetches a tokenizer from the network; this one needs none), and
Inspect's own log writer (``.eval`` and ``.json``), the two multiple-choice tasks' logs in
``<out>/choices``, the stated-confidence task's in ``<out>/stated``.

- ``toy_choice`` (240 questions, 2 to 5 choices, ``multiple_choice()`` and the ``choice()``
  scorer, ``logprobs=True, top_logprobs=6``): the model answers "ANSWER: X" greedily; the answer
  token's top log-probabilities hold every choice's letter and one token that is none of them.
- ``toy_choice_json``: the same kind of task (60 questions), written as a ``.json`` log.
- ``toy_stated`` (200 questions, the ``includes()``-like scorer below): the model answers a word
  and states its confidence as text ("85%", "0.85" or "high"), which the scorer keeps in its
  score's metadata as BrowseComp's scorer does.

The model's log-probabilities over a question's choices come from the question's text (a seeded
hash), and each gold answer is drawn from those probabilities at temperature 1.5, so the model is
overconfident by a known amount. Run it where ``inspect-ai`` is installed (it is not a dependency of
calib, not even for tests):

    pip install "inspect-ai==0.3.285"
    python tools/make_inspect_logs.py tests/data/inspect
"""

from __future__ import annotations

import hashlib
import os
import re
import sys

import numpy as np
from toy_questions import question_logits, softmax

LETTERS = "ABCDE"
WORDS = "red green blue amber violet cyan white black silver golden crimson teal".split()
#: The temperature of the answers' true distribution against the model's
TRUE_TEMPERATURE = 1.5


def choice_samples(task: str, count: int, seed: int):
    from inspect_ai.dataset import Sample

    rng = np.random.default_rng(seed)
    samples = []
    for i in range(count):
        k = int(rng.integers(2, 6))
        text = f"{task}, question {i}: which colour comes first?"
        choices = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 3)))) for _ in range(k)]
        gold = int(rng.choice(k, p=softmax(question_logits(text, k) / TRUE_TEMPERATURE)))
        samples.append(Sample(input=text, choices=choices, target=LETTERS[gold], id=f"{task}-{i}"))
    return samples


def stated_samples(count: int, seed: int):
    from inspect_ai.dataset import Sample

    rng = np.random.default_rng(seed)
    samples = []
    for i in range(count):
        text = f"stated question {i}: name a colour"
        p = float(softmax(question_logits(text, 2))[0])
        right = bool(rng.uniform() < p**TRUE_TEMPERATURE)
        samples.append(Sample(input=text, target="red" if right else "blue", id=f"stated-{i}"))
    return samples


def stated_confidence(text: str) -> str:
    """The confidence the model states for a question, as text in one of three forms."""
    p = float(softmax(question_logits(text, 2))[0])
    form = int(hashlib.sha256(text.encode()).digest()[9]) % 3
    if form == 0:
        return f"{round(100 * p)}%"
    if form == 1:
        return f"{p:.2f}"
    return "low" if p < 1 / 3 else ("medium" if p < 2 / 3 else "high")


def register_model():
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, GenerateConfig, ModelAPI, ModelOutput, modelapi
    from inspect_ai.model._model_output import Logprob, Logprobs, TopLogprob

    @modelapi(name="seeded")
    class SeededModel(ModelAPI):
        """Answers a multiple-choice prompt by its question's logits, with the answer token's log-probabilities."""

        def __init__(self, model_name: str, base_url=None, api_key=None, config: GenerateConfig = GenerateConfig(), **_):
            super().__init__(model_name, base_url, api_key, [], config)

        async def generate(self, input, tools, tool_choice, config):
            prompt = input[-1].text
            question = next(line for line in prompt.splitlines() if re.search(r"question \d+:", line))
            letters = re.findall(r"^([A-E])\) ", prompt, flags=re.MULTILINE)
            if not letters:  # a stated-confidence question: a word and a confidence in words or numbers
                reply = f"red\nCONFIDENCE: {stated_confidence(question)}"
                return ModelOutput(
                    model=self.model_name, choices=[ChatCompletionChoice(message=ChatMessageAssistant(content=reply))]
                )
            logits = question_logits(question, len(letters))
            other = np.log(0.03)  # a token that is no letter, holding 3% of the mass
            log_p = np.log(softmax(logits)) + np.log(0.97)
            answer = LETTERS[int(np.argmax(logits))]
            top = [TopLogprob(token=f" {letter}", logprob=float(lp)) for letter, lp in zip(letters, log_p)]
            top.append(TopLogprob(token=" The", logprob=float(other)))
            top.sort(key=lambda t: -t.logprob)
            content = [
                Logprob(token="ANSWER", logprob=-0.01, top_logprobs=[TopLogprob(token="ANSWER", logprob=-0.01)]),
                Logprob(token=":", logprob=-0.001, top_logprobs=[TopLogprob(token=":", logprob=-0.001)]),
                Logprob(token=f" {answer}", logprob=float(log_p.max()), top_logprobs=top),
            ]
            choice = ChatCompletionChoice(
                message=ChatMessageAssistant(content=f"ANSWER: {answer}"), logprobs=Logprobs(content=content)
            )
            return ModelOutput(model=self.model_name, choices=[choice])

    return SeededModel


def stated_scorer():
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, accuracy, scorer

    @scorer(metrics=[accuracy()])
    def word_with_confidence():
        async def score(state, target):
            answer, _, said = state.output.completion.partition("\nCONFIDENCE: ")
            return Score(
                value=CORRECT if answer.strip() == target.text else INCORRECT, answer=answer, metadata={"confidence": said}
            )

        return score

    return word_with_confidence()


def main(out: str) -> None:
    from inspect_ai import Task, eval
    from inspect_ai.model import GenerateConfig
    from inspect_ai.scorer import choice
    from inspect_ai.solver import generate, multiple_choice

    register_model()
    config = GenerateConfig(logprobs=True, top_logprobs=6, temperature=0.0)

    def choice_task(name: str, count: int, seed: int):
        return Task(
            dataset=choice_samples(name, count, seed), solver=multiple_choice(), scorer=choice(), name=name, config=config
        )

    tasks = [
        (choice_task("toy_choice", 240, 1), "eval", "choices"),
        (choice_task("toy_choice_json", 60, 2), "json", "choices"),
        (
            Task(dataset=stated_samples(200, 3), solver=generate(), scorer=stated_scorer(), name="toy_stated", config=config),
            "eval",
            "stated",
        ),
    ]
    for task, log_format, folder in tasks:
        os.makedirs(os.path.join(out, folder), exist_ok=True)
        [log] = eval(task, model="seeded/toy", log_dir=os.path.join(out, folder), log_format=log_format, display="none")
        print(task.name, log.status, log.location, {s.name: s.metrics["accuracy"].value for s in log.results.scores})


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/inspect")
