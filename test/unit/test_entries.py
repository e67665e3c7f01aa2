"""The conversation's entries and their one JSON record each (the transcript, dialogue/events).

The records are the monitor's and a finished run's format: each kind's fields as a table, so
a change to one is a change here, on purpose.
"""
from __future__ import annotations

import numpy as np

from vision_dialogue.core import entries as e
from vision_dialogue.core.conversation_types import TurnResult
from vision_dialogue.common.images import Frame
from vision_dialogue.core.conversation_types import SkillOutcome
from vision_dialogue.llm.tool_loop import ToolOutcome, ToolRecord

FRAME = Frame(bgr=np.zeros((4, 4, 3), np.uint8), id=7, stamp=12.5, observation="a cup",
              objects="cup")
TOOL = ToolRecord("c1", "canny", {"image": "a.png"}, ToolOutcome(image_file="b.png"))
REPLY = TurnResult(3, "hi", "Hello.", ["Hello."], frame_ids=[7], summary_ids=[(1, 2)],
                   tools=[TOOL], first_sentence_s=0.5, reply_s=0.9, prompt_chars=120)
RECORDS = [
    (e.FrameEntry(FRAME), {"type": "frame", "frame_id": 7, "stamp": 12.5, "file": None,
                           "dark": False, "observation": "a cup", "objects": "cup"}),
    (e.ObjectsEntry(FRAME, "cup"), {"type": "objects", "frame_id": 7, "text": "cup",
                                    "observation": "a cup"}),
    (e.UserEntry(3, "hi", "ada"), {"type": "user", "turn_id": 3, "text": "hi",
                                   "speaker": "ada"}),
    (e.UserEntry(3, "Ada", "ada", skill="ask"), {"type": "user", "turn_id": 3, "text": "Ada",
                                                 "speaker": "ada", "skill": "ask"}),
    (e.ReplyEntry(REPLY), {"type": "reply", "turn_id": 3, "in_reply_to": "hi",
                           "text": "Hello.", "sentences": ["Hello."], "fallback": False,
                           "error": None, "frames_in_prompt": [7],
                           "summaries_in_prompt": [[1, 2]], "first_sentence_s": 0.5,
                           "reply_s": 0.9, "prompt_chars": 120,
                           "tools": [{"name": "canny", "arguments": {"image": "a.png"},
                                      "text": None, "image_file": "b.png", "error": None}]}),
    (e.ExchangeEntry("a figure", "Received.", {"image_file": "a.png", "bgr": FRAME.bgr}),
     {"type": "exchange", "user": "a figure", "robot": "Received.", "image_file": "a.png"}),
    (e.SummarisingEntry([1, 2]), {"type": "summarising", "frame_ids": [1, 2]}),
    (e.SummaryDeferredEntry([1, 2]), {"type": "summary_deferred", "frame_ids": [1, 2]}),
    (e.SummaryEntry([1, 2], "A cup.", "merge", item=object()),
     {"type": "summary", "frame_ids": [1, 2], "text": "A cup.", "method": "merge"}),
    (e.SummaryFailedEntry([1, 2], "timeout", 3, marker=object()),
     {"type": "summary_failed", "frame_ids": [1, 2], "error": "timeout", "attempts": 3,
      "marker": True}),
    (e.FoldEntry(4, "They talked."), {"type": "fold", "items": 4,
                                      "history_summary": "They talked."}),
    (e.FoldFailedEntry(4, "timeout"), {"type": "fold_failed", "items": 4, "error": "timeout"}),
    (e.DroppedEntry("hi", "expired", "ada"), {"type": "dropped", "text": "hi",
                                              "reason": "expired", "speaker": "ada"}),
    (e.PersonEntry("arrived", "3"), {"type": "person", "event": "arrived", "id": "3"}),
    (e.SeenEntry("someone waved", "wave", 12.5), {"type": "event", "text": "someone waved",
                                                  "event": "wave", "stamp": 12.5}),
    (e.ToolEntry(3, TOOL), None),
    (e.SkillEntry("ask", "g1", "start"), {"type": "skill", "skill": "ask", "goal": "g1",
                                          "stage": "start"}),
    (e.SkillEntry("ask", "g1", "end", SkillOutcome("answered", {"name": "Ada"})),
     {"type": "skill", "skill": "ask", "goal": "g1", "stage": "end", "status": "answered",
      "success": True, "error": "", "result": {"name": "Ada"}}),
    (e.IntentEntry("lift", {"floor": 4}, "ada", "the fourth floor", 0.9),
     {"type": "intent", "intent": "lift", "data": {"floor": 4}, "source": "ada",
      "utterance": "the fourth floor", "confidence": 0.9}),
    (e.RobotActionEntry("wave", "service", "/wave", "sent", {"times": 2}),
     {"type": "robot_action", "tool": "wave", "kind": "service", "address": "/wave",
      "stage": "sent", "arguments": {"times": 2}}),
    (e.RobotActionEntry("wave", "service", "/wave", "done", "waved"),
     {"type": "robot_action", "tool": "wave", "kind": "service", "address": "/wave",
      "stage": "done", "text": "waved"}),
    (e.FaceEntry({"expression": "happy", "gesture": "BigSmile"}),
     {"type": "face", "expression": "happy", "gesture": "BigSmile"}),
]


def test_each_entry_has_its_one_record():
    for entry, record in RECORDS:
        assert entry.to_record() == record, type(entry).__name__


def test_every_kind_of_entry_is_in_the_table_with_its_own_type():
    kinds = {cls for cls in vars(e).values()
             if isinstance(cls, type) and issubclass(cls, e.Entry) and cls is not e.Entry}
    assert kinds == {type(entry) for entry, _ in RECORDS}
    types = [cls.TYPE for cls in kinds]
    assert all(types) and len(set(types)) == len(types)
