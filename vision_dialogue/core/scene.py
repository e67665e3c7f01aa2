"""What the conversation is told about the scene between turns (ROS-free).

Who is in view (a person manager's or a camera's tracked people, and their arrivals and
departures), something seen between frames (a wave), an object detector's note that came
after its frame, and "forget me". A mixin of `Conversation`: each goes into the prompt
(its PromptAssembly and timeline) and tells the listeners, as a frame does.
"""
from __future__ import annotations

import time

from vision_dialogue.common.images import Frame
from vision_dialogue.common.redaction import ForgottenPeople
from vision_dialogue.core.entries import ObjectsEntry, PersonEntry, SeenEntry


class SceneInput:
    """Conversation's input about the scene (see the module docstring)."""

    def set_people(self, description: str, arrived=(), left=(), known=()) -> None:
        """Who the camera tracks now, in words (Furhat's users; "" for nobody).

        `arrived`, `left`: ids that came into view or went; each is a "person" event (the
        transcript, the monitor). `known`: the names of people a person manager named (the
        opening remark greets them by name). A change is read ahead (a warm-up), so the first
        reply to a person who came does not read their notes (the memory's standing note).
        """
        changed = (description, tuple(known)) != (self.prompt.people_now(),
                                                  self.prompt.known_in_view)
        self.prompt.set_people(description)
        self.prompt.known_in_view = tuple(known)
        if changed:
            self.warmer.soon()
        for event, ids in (("arrived", arrived), ("left", left)):
            for i in ids:
                self._emit(PersonEntry(event, str(i)))
                self.add_event(f"user {i} {'came into view' if event == 'arrived' else 'left'}",
                               event=event)

    def forget(self, who: ForgottenPeople) -> int:
        """Forget me: their lines' words and their names out of the prompt; items changed."""
        self.prompt.known_in_view = tuple(n for n in self.prompt.known_in_view
                                          if not who.is_them(n))
        self.prompt.set_people(who.redact(self.prompt.people_now()))
        return self.timeline.redact(who)

    def add_event(self, text: str, stamp: float | None = None, event: str = "") -> None:
        """Something seen between frames ("someone on the left waved") into the timeline.

        `event`: the detector's kind (wave, arrived, ...); tells a SeenEntry (transcript, monitor).
        """
        text = " ".join(str(text).split())
        if not text:
            return
        stamp = time.time() if stamp is None else stamp
        self.timeline.add_event(text, stamp, event)
        self._emit(SeenEntry(text, event, stamp))

    def set_objects(self, frame_stamp: float, note: str) -> bool:
        """An object detector's note for the recent frame stamped `frame_stamp`.

        For detections that came after their frame; False if that frame is no longer raw in
        the timeline.
        """
        frame = self.prompt.raw_frame(frame_stamp)
        if frame is None:
            return False
        if not frame.dark:
            frame.set_objects(note, text_only=not self.supports_images)
            self._emit(ObjectsEntry(frame, note))
        return True

    def newest_frame(self) -> Frame | None:
        """The newest camera frame it took (None before the first)."""
        return self.prompt.newest

    def camera_lost(self) -> bool:
        """Whether the camera stopped sending frames (the prompt then says so)."""
        return self.prompt.camera_lost()
