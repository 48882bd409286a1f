"""Write the lm-evaluation-harness sample logs that tests/unit/io/formats/test_harness_samples.py reads, with the harness's
own code: ``simple_evaluate`` over two local multiple-choice tasks (JSON datasets with 2 to 5 choices
per question, written here from a seed), a small language model of our own whose log-likelihoods
favour the right choice by a seeded margin, ``log_samples=True``, and the harness's
``EvaluationTracker`` writing ``results_<date>.json`` and ``samples_<task>_<date>.jsonl``.

Run it where ``lm-eval`` is installed (it is not a dependency of calib, not even for tests):

    pip install "lm-eval==0.4.9" "transformers<4.56" "datasets<4"
    python tools/make_lm_eval_samples.py tests/data/lm_eval
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile

import numpy as np

#: (task, questions, seed, the margin of the right choice's log-likelihood in nats)
TASKS = (("toy_mc_easy", 240, 1, 2.0), ("toy_mc_hard", 160, 2, 0.6))
WORDS = "red green blue amber violet cyan white black silver golden crimson teal".split()


def questions(task: str, count: int, seed: int) -> list[dict]:
    """Questions with 2 to 5 choices of 1 to 3 words each, the gold index uniform."""
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(count):
        k = int(rng.integers(2, 6))
        choices = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 4)))) for _ in range(k)]
        docs.append({"question": f"{task}, question {i}: which colour?", "choices": choices, "gold": int(rng.integers(k))})
    return docs


def task_yaml(task: str, data: str) -> str:
    return f"""task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{gold}}}}"
metric_list:
  - metric: acc
  - metric: acc_norm
"""


def make_model(golds: dict, margins: dict):
    from lm_eval.api.model import LM

    class SeededLM(LM):
        """Log-likelihood of a continuation: -0.8 per character plus seeded noise, plus the task's
        margin when it is the question's right answer."""

        def loglikelihood(self, requests):
            out = []
            for request in requests:
                context, continuation = request.args
                digest = hashlib.sha256(f"{context}|{continuation}".encode()).digest()
                noise = np.random.default_rng(int.from_bytes(digest[:8], "little")).normal(0.0, 1.0)
                task, gold = golds[context]
                bonus = margins[task] if continuation.strip() == gold else 0.0
                out.append((float(-0.8 * len(continuation.strip()) + noise + bonus), False))
            return out

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError("multiple-choice tasks only")

        def generate_until(self, requests):
            raise NotImplementedError("multiple-choice tasks only")

    return SeededLM()


def main(out: str) -> None:
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    golds, margins = {}, {}
    with tempfile.TemporaryDirectory() as folder:
        for task, count, seed, margin in TASKS:
            data = os.path.join(folder, f"{task}.json")
            with open(data, "w") as handle:
                for doc in questions(task, count, seed):
                    handle.write(json.dumps(doc) + "\n")
                    golds[doc["question"]] = (task, doc["choices"][doc["gold"]])
            with open(os.path.join(folder, f"{task}.yaml"), "w") as handle:
                handle.write(task_yaml(task, data))
            margins[task] = margin
        tracker = EvaluationTracker(output_path=out)
        results = simple_evaluate(
            model=make_model(golds, margins),
            model_args="pretrained=seeded-lm",
            tasks=[task for task, *_ in TASKS],
            task_manager=TaskManager(include_path=folder),
            log_samples=True,
            evaluation_tracker=tracker,
            random_seed=0,
            numpy_random_seed=0,
            torch_random_seed=0,
            fewshot_random_seed=0,
        )
        samples = results.pop("samples")
        tracker.save_results_aggregated(results=results, samples=samples)
        for task in results["configs"]:
            tracker.save_results_samples(task_name=task, samples=samples[task])
            print(task, json.dumps(results["results"][task]))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/lm_eval")
