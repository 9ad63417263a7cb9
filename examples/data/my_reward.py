"""A reward function of your own, in OpenRLHF's `reward_func` signature (batched):

    cascade rlvr --domain math --init tiny --data runs/tiny/data_math --out runs/tiny/my_rl \
        --reward-func examples/data/my_reward.py:score

`queries[i]`: the prompt as the model saw it followed by its response; `prompts[i]`: the prompt alone;
`labels[i]`: the row's label (an object arrives as its JSON text, with the row's domain added).
Return n numbers, or OpenRLHF's {"rewards": ..., "scores": ..., "extra_logs": ...}.
"""

import json
import re


def score(queries, prompts, labels):
    rewards = []
    for query, prompt, label in zip(queries, prompts, labels, strict=True):
        response = query[len(prompt) :]
        answer = str(json.loads(label)["answer"]) if label.startswith("{") else label
        numbers = re.findall(r"-?\d+(?:\.\d+)?", response)
        # 1 for the right final number; a little for answering with a number at all (shaping)
        rewards.append(1.0 if numbers and numbers[-1] == answer else 0.1 if numbers else 0.0)
    return {"rewards": rewards, "scores": rewards, "extra_logs": {}}
