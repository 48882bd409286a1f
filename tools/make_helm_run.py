"""Write the HELM run folders that tests/unit/io/formats/test_helm_runs.py reads, with HELM's own code:
``helm-run`` (crfm-helm's ``helm.benchmark.run.main``) over two local multiple-choice scenarios
registered here as a plugin, a seeded client of our own (a model deployment in ``prod_env``; it
needs no network), HELM's ``multiple_choice_joint`` adapter and its exact-match metrics, which
compute ``max_prob`` per instance and the calibration numbers (``ece_10_bin``, ``ece_1_bin``,
``platt_ece_10_bin``, ``selective_cov_acc_area``, ``selective_acc@10``) in ``stats.json``.

- ``toy_mcqa:difficulty=easy`` (240 questions, 2 to 4 choices) and ``toy_mcqa:difficulty=hard``
  (160): the client answers the letter of the highest of its logits over the question's choices
  (from the question's text, a seeded hash), with that letter's log-probability; each gold answer is
  drawn from those probabilities at temperature 1.5 (easy) or 2.5 (hard), so the model is
  overconfident by a known amount.

Run it where ``crfm-helm`` is installed (it is not a dependency of calib, not even for tests):

    pip install "crfm-helm==0.5.16"
    python tools/make_helm_run.py tests/data/helm

The suite's run folders land in ``<out>/runs/toy/`` with the files calib reads or tests against
(:data:`KEPT`: the per-instance stats, the run's stats, its spec); ``scenario_state.json`` (every
request and completion, 2 KB an instance), the cache and HELM's other outputs are left in a
temporary folder.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from toy_questions import question_logits, softmax  # noqa: E402

#: The files of each run folder copied to the output
KEPT = ("per_instance_stats.json", "stats.json", "run_spec.json", "scenario.json")
WORDS = "red green blue amber violet cyan white black silver golden crimson teal".split()
LETTERS = "ABCD"
#: (difficulty, questions, seed, the temperature of the answers' true distribution)
DIFFICULTIES = {"easy": (240, 1, 1.5), "hard": (160, 2, 2.5)}

DEPLOYMENTS = """model_deployments:
  - name: toy/seeded
    model_name: toy/seeded
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 4096
    client_spec:
      class_name: "make_helm_run.SeededClient"
"""
METADATA = """models:
  - name: toy/seeded
    display_name: Seeded toy model
    description: A seeded model that answers multiple-choice questions by its logits, for calib's tests.
    creator_organization_name: calib
    access: open
    release_date: 2026-01-01
    tags: [TEXT_MODEL_TAG, FULL_FUNCTIONALITY_TEXT_MODEL_TAG]
"""


def register() -> None:
    """The scenario, its run spec and the client, as HELM finds them (plugin module and classes)."""
    from helm.benchmark.adaptation.common_adapter_specs import get_multiple_choice_joint_adapter_spec
    from helm.benchmark.metrics.common_metric_specs import get_exact_match_metric_specs
    from helm.benchmark.run_spec import RunSpec, run_spec_function
    from helm.benchmark.scenarios.scenario import (
        CORRECT_TAG,
        TEST_SPLIT,
        TRAIN_SPLIT,
        Input,
        Instance,
        Output,
        Reference,
        Scenario,
        ScenarioSpec,
    )
    from helm.clients.client import CachingClient
    from helm.common.request import GeneratedOutput, RequestResult, Token, wrap_request_time

    class ToyMCQAScenario(Scenario):
        name = "toy_mcqa"
        description = "Seeded multiple-choice questions about colours"
        tags = ["question answering"]

        def __init__(self, difficulty: str):
            super().__init__()
            self.difficulty = difficulty

        def get_instances(self, output_path: str):
            count, seed, temperature = DIFFICULTIES[self.difficulty]
            rng = np.random.default_rng(seed)
            instances = [
                Instance(
                    Input(text="Which colour is warm?"),
                    [Reference(Output(text="red"), tags=[CORRECT_TAG]), Reference(Output(text="blue"), tags=[])],
                    split=TRAIN_SPLIT,
                )
            ]
            for i in range(count):
                k = int(rng.integers(2, 5))
                text = f"{self.difficulty} question {i}: which colour comes first?"
                gold = int(rng.choice(k, p=softmax(question_logits(text, k) / temperature)))
                choices = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 3)))) + f" {j}" for j in range(k)]
                references = [Reference(Output(text=c), tags=[CORRECT_TAG] if j == gold else []) for j, c in enumerate(choices)]
                instances.append(Instance(Input(text=text), references, split=TEST_SPLIT, id=f"id{i}"))
            return instances

    module = sys.modules[__name__]
    module.ToyMCQAScenario = ToyMCQAScenario

    @run_spec_function("toy_mcqa")
    def toy_mcqa_spec(difficulty: str = "easy") -> RunSpec:
        return RunSpec(
            name=f"toy_mcqa:difficulty={difficulty}",
            scenario_spec=ScenarioSpec(class_name=f"{__name__}.ToyMCQAScenario", args={"difficulty": difficulty}),
            adapter_spec=get_multiple_choice_joint_adapter_spec(
                instructions="Answer with a single letter.", input_noun="Question", output_noun="Answer", max_train_instances=1
            ),
            metric_specs=get_exact_match_metric_specs(),
            groups=["toy_mcqa"],
        )

    class SeededClient(CachingClient):
        """Answers the last question of the prompt with the letter of its highest logit."""

        def make_request(self, request):
            question = [line for line in request.prompt.splitlines() if "question" in line][-1]
            letters = [line[0] for line in request.prompt.split(question)[-1].splitlines() if line[1:3] == ". "]
            logits = question_logits(question.split("Question: ")[-1], len(letters))
            log_p = np.log(softmax(logits))
            best = int(np.argmax(logits))
            text, logprob = f" {LETTERS[best]}", float(log_p[best])

            def do_it():
                return {"text": text, "logprob": logprob}

            response, cached = self.cache.get({"prompt": request.prompt, "engine": "seeded"}, wrap_request_time(do_it))
            completion = GeneratedOutput(
                text=response["text"],
                logprob=response["logprob"],
                tokens=[Token(text=response["text"], logprob=response["logprob"])],
            )
            return RequestResult(
                success=True, cached=cached, request_time=response["request_time"], completions=[completion], embedding=[]
            )

    module.SeededClient = SeededClient


def main(out: str) -> None:
    from helm.benchmark import run

    sys.path.insert(0, HERE)
    work = tempfile.mkdtemp(prefix="helm-run-")
    os.makedirs(os.path.join(work, "prod_env"))
    with open(os.path.join(work, "prod_env", "model_deployments.yaml"), "w") as handle:
        handle.write(DEPLOYMENTS)
    with open(os.path.join(work, "prod_env", "model_metadata.yaml"), "w") as handle:
        handle.write(METADATA)
    entries = [f"toy_mcqa:difficulty={d},model=toy/seeded" for d in DIFFICULTIES]
    sys.argv = ["helm-run", "--run-entries", *entries, "--suite", "toy", "--max-eval-instances", "1000"]
    sys.argv += ["--output-path", os.path.join(work, "benchmark_output"), "--local-path", os.path.join(work, "prod_env")]
    sys.argv += ["--plugins", "make_helm_run", "-n", "1"]
    run.main()
    runs = os.path.join(work, "benchmark_output", "runs", "toy")
    target = os.path.join(out, "runs", "toy")
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    for folder in sorted(os.listdir(runs)):
        if os.path.isfile(os.path.join(runs, folder, KEPT[0])):
            os.makedirs(os.path.join(target, folder))
            for kept in KEPT:
                shutil.copy(os.path.join(runs, folder, kept), os.path.join(target, folder, kept))
            print(folder, sorted(os.listdir(os.path.join(target, folder))))


if __name__ == "make_helm_run":  # imported by helm-run as its plugin
    register()
if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/helm")
