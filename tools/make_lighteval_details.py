"""Write the lighteval details that tests/unit/io/formats/test_lighteval_details.py reads, with
lighteval's own code: its ``Pipeline`` over two local multiple-choice tasks (a custom-tasks module,
datasets read from local JSON-lines folders), a custom model of our own (``CustomModelConfig``:
this file defines exactly one ``LightevalModel``), its ``loglikelihood_acc`` metric, and its
``EvaluationTracker`` writing ``results/<model>/results_<date>.json`` and
``details/<model>/<date>/details_<task>_<date>.parquet``.

- ``toy_mc_easy`` (240 questions) and ``toy_mc_hard`` (160), 2 to 5 choices each: the model's
  log-likelihood of each choice is its logit (tools/toy_questions.py, from the question's text)
  less the log-sum-exp over the choices; each gold answer is drawn from those probabilities at
  temperature 1.5 (easy) or 2.5 (hard).

Run it where ``lighteval`` is installed (it is not a dependency of calib, not even for tests):

    pip install "lighteval==0.13.0"
    python tools/make_lighteval_details.py tests/data/lighteval

The same file is lighteval's custom-tasks module and its custom-model file (both loaded by path).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from toy_questions import question_logits, softmax  # noqa: E402

WORDS = "red green blue amber violet cyan white black silver golden crimson teal".split()
#: (task, questions, seed, the temperature of the answers' true distribution)
TASKS = (("toy_mc_easy", 240, 1, 1.5), ("toy_mc_hard", 160, 2, 2.5))
#: Where the tasks' datasets are written, for the custom-tasks module loaded by path
DATA_ENV = "CALIB_TOY_LIGHTEVAL_DATA"


def write_datasets(folder: str) -> None:
    for task, count, seed, temperature in TASKS:
        rng = np.random.default_rng(seed)
        os.makedirs(os.path.join(folder, task), exist_ok=True)
        with open(os.path.join(folder, task, "test.jsonl"), "w") as handle:
            for i in range(count):
                k = int(rng.integers(2, 6))
                question = f"{task} question {i}: which colour comes first?"
                choices = [" " + " ".join(rng.choice(WORDS, size=int(rng.integers(1, 3)))) for _ in range(k)]
                gold = int(rng.choice(k, p=softmax(question_logits(question, k) / temperature)))
                handle.write(json.dumps({"question": question, "choices": choices, "gold": gold}) + "\n")


def prompt(line: dict, task_name: str = ""):
    from lighteval.tasks.requests import Doc

    return Doc(task_name=task_name, query=line["question"] + "\nAnswer:", choices=line["choices"], gold_index=line["gold"])


def tasks_table() -> list:
    from lighteval.metrics.metrics import Metrics
    from lighteval.tasks.lighteval_task import LightevalTaskConfig

    folder = os.environ[DATA_ENV]
    return [
        LightevalTaskConfig(
            name=task,
            prompt_function=prompt,
            hf_repo=os.path.join(folder, task),
            hf_subset="default",
            hf_avail_splits=["test"],
            evaluation_splits=["test"],
            metrics=[Metrics.loglikelihood_acc],
        )
        for task, *_ in TASKS
    ]


if os.environ.get(DATA_ENV):  # loaded by lighteval as its custom-tasks module and custom-model file
    from lighteval.models.abstract_model import LightevalModel
    from lighteval.models.model_output import ModelResponse
    from lighteval.utils.cache_management import SampleCache

    TASKS_TABLE = tasks_table()

    class SeededModel(LightevalModel):
        """Log-likelihoods of each choice from the question's logits (log-softmax over the choices)."""

        def __init__(self, config):
            self.config = config
            self._cache = SampleCache(config)

        @property
        def tokenizer(self):
            return None

        @property
        def add_special_tokens(self) -> bool:
            return False

        @property
        def max_length(self) -> int:
            return 4096

        def loglikelihood(self, docs):
            responses = []
            for doc in docs:
                question = doc.query.split("\n")[0]
                z = question_logits(question, len(doc.choices))
                log_p = z - np.log(np.exp(z - z.max()).sum()) - z.max()
                responses.append(ModelResponse(input=doc.query, logprobs=[float(v) for v in log_p], output_tokens=[[1]] * len(z)))
            return responses

        def greedy_until(self, docs):
            raise NotImplementedError("the toy tasks score choices by their log-likelihoods only")

        def loglikelihood_rolling(self, docs):
            raise NotImplementedError("the toy tasks score choices by their log-likelihoods only")


def without_builtin_tasks() -> None:
    """lighteval's registry imports every built-in task module before it reads the custom ones, and
    some download at import (tiny_benchmarks a file from GitHub, mt_bench a judge's model list).
    With no network here the registry reads the custom-tasks module alone."""
    from lighteval.tasks.registry import Registry

    Registry._load_from_files = staticmethod(lambda files, module_prefix: {})
    Registry._load_from_subdirs = staticmethod(lambda subdirs: {})


def main(out: str) -> None:
    without_builtin_tasks()
    work = tempfile.mkdtemp(prefix="lighteval-run-")
    os.environ[DATA_ENV] = os.path.join(work, "data")
    write_datasets(os.environ[DATA_ENV])
    from lighteval.logging.evaluation_tracker import EvaluationTracker
    from lighteval.models.custom.custom_model import CustomModelConfig
    from lighteval.pipeline import ParallelismManager, Pipeline, PipelineParameters

    tracker = EvaluationTracker(output_dir=os.path.join(work, "out"), save_details=True)
    parameters = PipelineParameters(launcher_type=ParallelismManager.CUSTOM, custom_tasks_directory=os.path.abspath(__file__))
    config = CustomModelConfig(model_name="toy/seeded", model_definition_file_path=os.path.abspath(__file__))
    pipeline = Pipeline(
        tasks=",".join(f"{task}|0" for task, *_ in TASKS),
        pipeline_parameters=parameters,
        evaluation_tracker=tracker,
        model_config=config,
    )
    pipeline.evaluate()
    pipeline.save_and_push_results()
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(os.path.join(work, "out"), out)
    for root, _, files in os.walk(out):
        for name in files:
            print(os.path.join(root, name))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/lighteval")
