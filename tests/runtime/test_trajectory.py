import json

import numpy as np
import pytest

from runtime.trajectory import Trajectory, TrajectoryError, image, read_jsonl, text, tool_call, write_jsonl
from tools.images import demo_image


def sample() -> Trajectory:
    t = Trajectory(tools=[{"type": "function", "function": {"name": "crop", "parameters": {}}}], meta={"task": "t1"})
    t.add_image(demo_image(40, 30))
    t.add("system", "Be brief.")
    t.add("user", image(0), "Où est le chat? 🐱")
    t.add("assistant", "<think>crop</think>", tool_calls=[tool_call("call_0", "crop", {"box": [1, 2, 3, 4]})])
    t.add_image(demo_image(8, 9, gray=True))
    t.add("tool", image(1), "ok", tool_call_id="call_0", name="crop")
    t.add("assistant", "<answer>left</answer>")
    return t


def test_round_trip_is_exact(tmp_path):
    t = sample()
    data = t.to_dict(tmp_path / "images")
    json.dumps(data)  # serializable
    back = Trajectory.from_dict(json.loads(json.dumps(data)), tmp_path / "images")
    assert back == t
    assert back.images[1].ndim == 2 and back.images[1].dtype == np.uint8


def test_images_are_stored_once_by_content(tmp_path):
    a, b = sample(), sample()
    write_jsonl(tmp_path / "data.jsonl", [a, b])
    assert len(list((tmp_path / "images").glob("*.png"))) == 2
    assert list(read_jsonl(tmp_path / "data.jsonl")) == [a, b]


def test_a_line_cut_by_a_crash_is_skipped_and_appending_resumes(tmp_path):
    path = tmp_path / "data.jsonl"
    write_jsonl(path, [sample()])
    with open(path, "a") as f:
        f.write('{"version": 1, "messages": [')  # a writer killed mid-line
    assert len(list(read_jsonl(path))) == 1
    write_jsonl(path, [sample()], append=True)  # the partial line is cut first
    assert len(list(read_jsonl(path))) == 2


def test_a_modified_image_file_is_detected(tmp_path):
    data = sample().to_dict(tmp_path)
    victim = tmp_path / f"{data['images'][0]}.png"
    from PIL import Image
    Image.fromarray(np.zeros((30, 40, 3), np.uint8)).save(victim)
    with pytest.raises(TrajectoryError, match="does not match its hash"):
        Trajectory.from_dict(data, tmp_path)


def test_missing_image_names_the_file(tmp_path):
    data = sample().to_dict(tmp_path / "a")
    with pytest.raises(TrajectoryError, match="is missing"):
        Trajectory.from_dict(data, tmp_path / "b")


@pytest.mark.parametrize("message, problem", [
    ({"role": "robot", "content": []}, "role"),
    ({"role": "user", "content": "hi"}, "list of parts"),
    ({"role": "user", "content": [{"type": "image", "image": 3}]}, "bad content part"),
    ({"role": "user", "content": [text("x")], "tool_calls": [tool_call("a", "b", {})]}, "only assistant"),
    ({"role": "assistant", "content": [], "tool_calls": [{"id": "a", "function": {"name": "b", "arguments": {}}}]},
     "bad tool call"),
])
def test_bad_messages_are_named(message, problem):
    t = sample()
    t.messages.append(message)
    with pytest.raises(TrajectoryError, match=problem):
        t.validate()


def test_bad_images_are_rejected():
    with pytest.raises(TrajectoryError, match="uint8"):
        Trajectory().add_image(np.zeros((4, 4, 3), np.float32))
    with pytest.raises(TrajectoryError, match="uint8"):
        Trajectory().add_image(np.zeros((4, 4, 4), np.uint8))


def test_version_mismatch_is_explained(tmp_path):
    data = sample().to_dict(tmp_path)
    data["version"] = 99
    with pytest.raises(TrajectoryError, match="version"):
        Trajectory.from_dict(data, tmp_path)


def test_meta_that_would_not_read_back_equal_is_refused(tmp_path):
    for meta in ({"box": (1, 2)}, {1: "a"}, {"score": float("nan")}):
        with pytest.raises(TrajectoryError, match="meta"):
            Trajectory(meta=meta).to_dict(tmp_path)


def test_a_bad_line_is_named(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text("[1]\n")
    with pytest.raises(TrajectoryError, match="data.jsonl:1"):
        list(read_jsonl(path))


def test_threads_saving_the_same_image_do_not_collide(tmp_path):
    from concurrent.futures import ThreadPoolExecutor
    from runtime.trajectory import save_image
    array = demo_image(64, 64, seed=3)
    with ThreadPoolExecutor(8) as pool:
        keys = set(pool.map(lambda _: save_image(array, tmp_path), range(32)))
    assert len(keys) == 1 and [p.suffix for p in tmp_path.iterdir()] == [".png"]


def test_drop_partial_line_cuts_only_an_unfinished_last_line(tmp_path):
    from runtime.trajectory import drop_partial_line

    path = tmp_path / "lines.jsonl"
    for content, kept in ((b'{"a": 1}\n{"b"', b'{"a": 1}\n'), (b'{"a": 1}\n', b'{"a": 1}\n'), (b'{"b"', b""),
                          (b"", b"")):
        path.write_bytes(content)
        drop_partial_line(path)
        assert path.read_bytes() == kept, content
