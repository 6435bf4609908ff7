from sparksync.core.base.listeners import Listeners


def test_listeners_are_called_from_a_snapshot_and_unsubscribe_once():
    listeners: Listeners = Listeners()
    calls = []
    stop_b = None

    def a(x):
        calls.append(("a", x))
        stop_b()  # unsubscribing another listener mid-iteration must not skip or break anything

    def b(x):
        calls.append(("b", x))

    listeners.add(a)
    stop_b = listeners.add(b)
    for listener in listeners.snapshot():
        listener(1)
    for listener in listeners.snapshot():
        listener(2)
    stop_b()  # a second call is harmless
    assert calls == [("a", 1), ("b", 1), ("a", 2)]
