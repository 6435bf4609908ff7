"""The turns of one chat: what the user said and what came back, with each answer's figures."""

from __future__ import annotations

from dataclasses import dataclass, field

from sparksync.core.chat.stream import Answer

SYSTEM = "You are a helpful assistant."


@dataclass
class Turn:
    question: str
    answer: Answer | None = None  # None while it streams in, or when it failed
    error: str | None = None


@dataclass
class Conversation:
    target_key: str | None = None
    turns: list[Turn] = field(default_factory=list)

    def ask(self, question: str) -> list[dict[str, str]]:
        """Add the user's question; returns the messages to send (earlier answered turns included)."""
        messages = [{"role": "system", "content": SYSTEM}]
        for turn in self.turns:
            if turn.answer is not None and turn.answer.text:
                messages += [{"role": "user", "content": turn.question},
                             {"role": "assistant", "content": turn.answer.text}]  # fmt: skip
        self.turns.append(Turn(question))
        messages.append({"role": "user", "content": question})
        return messages

    def answered(self, answer: Answer) -> None:
        self.turns[-1].answer = answer

    def failed(self, why: str) -> None:
        self.turns[-1].error = why

    def clear(self, target_key: str | None = None) -> None:
        """A fresh conversation (another target was picked: its model knows nothing of this one)."""
        self.turns = []
        self.target_key = target_key
