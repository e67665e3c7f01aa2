"""camera/loss.py: frames a publisher announced against frames that arrived (ROS-free)."""
from vision_dialogue.camera.loss import LossMeter


def test_gaps_in_sequence_numbers_are_lost_frames_per_publisher():
    t = [0.0]
    m = LossMeter(min_announced=4, max_loss=0.2, clock=lambda: t[0])
    for seq in (1, 2, 3, 4, 5, 6):
        m.arrived(b"cam", seq)                   # all of them
    for seq in (10, 13, 16, 19):
        m.arrived(b"driver", seq)                # 4 of 10
    by = {p.publisher: p for p in m.publishers()}
    assert (by[b"cam"].announced, by[b"cam"].arrived, by[b"cam"].lost) == (6, 6, 0)
    assert (by[b"driver"].announced, by[b"driver"].arrived, by[b"driver"].lost) == (10, 4, 6)
    assert [p.publisher for p in m.losing()] == [b"driver"]


def test_too_few_frames_to_judge_a_restart_and_no_sequence_numbers():
    m = LossMeter(min_announced=4)
    m.arrived(b"a", 1)
    m.arrived(b"a", 3)                           # 2 of 3: too few announced to judge
    assert m.losing() == []
    for seq in (100, 110):
        m.arrived(b"a", seq)
    (lost,) = m.losing()
    assert (lost.announced, lost.arrived) == (110, 4)
    m.arrived(b"a", 1)                           # the publisher restarted: counted anew
    assert m.publishers()[0].announced == 1 and m.losing() == []
    m.arrived(b"b", None)                        # a middleware without sequence numbers
    m.arrived(b"b", 0)
    assert [p.publisher for p in m.publishers()] == [b"a"]


def test_losses_the_middleware_reports_count_for_publishers_seen_before_them():
    """No frame arrives at all, yet the middleware reports each one lost: that is a loss.

    Reports name no publisher: they count for each publisher that was on the topic when they
    came, with that publisher's own arrivals, and not for one that came after them.
    """
    t = [0.0]
    m = LossMeter(min_announced=4, max_loss=0.2, clock=lambda: t[0])
    m.seen(b"driver")
    m.lost(3)
    assert m.reported_loss(b"driver") is None          # too few to judge
    t[0] = 2.0
    m.lost(2)
    loss = m.reported_loss(b"driver")
    assert (loss.announced, loss.arrived, loss.since) == (5, 0, 0.0)
    m.seen(b"later")                                  # came after the losses
    assert m.reported_loss(b"later") is None
    assert m.reported_loss(b"never seen") is None
    for seq in range(1, 40):                          # a publisher whose frames do arrive
        m.arrived(b"good", seq)
    m.seen(b"good")
    m.lost(5)
    assert m.reported_loss(b"good") is None           # 5 lost against 39 arrived
    assert m.total_lost() == 10
