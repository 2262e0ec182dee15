"""A judge backend for tests: it answers requests in order from a script."""

from eval.backends import Completion


class ScriptedBackend:
    """Answers each request with the next reply of `replies` (None: the request fails), as a plain text or, with
    `as_message`, as the reply message an OpenAI-compatible server returns; records what it was sent."""
    name = "scripted"

    def __init__(self, replies, as_message: bool = False):
        self.replies, self.as_message, self.sent, self.done = list(replies), as_message, [], []

    def submit(self, key, prompt, sampling):
        self.sent.append((prompt, sampling))
        reply = self.replies.pop(0)
        if reply is None:
            completion = Completion("", error="HTTP 503")
        else:
            completion = Completion({"role": "assistant", "content": reply} if self.as_message else reply)
        self.done.append((key, completion))

    def poll(self, timeout=None):
        done, self.done = self.done, []
        return done

    def in_flight(self):
        return len(self.done)

    def close(self):
        pass
