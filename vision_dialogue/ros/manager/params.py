"""The manager node's parameters: their table, their cross-check, what is built from them.

The table is what `declare_params` reads; from the values come the LLM backend's options
and the conversation's config.

Apart from manager_node.py so the node only wires ROS to the core; `manager_node --help`, the
docs test and `bringup -p manager.NAME:=...` read the same table.
"""
from __future__ import annotations

from pathlib import Path

from vision_dialogue.core.conversation_types import DECIDE_ACTIONS, ConversationConfig
from vision_dialogue.common.images import DEFAULT_MAX_PIXELS, DETAILS, ImagePolicy
from vision_dialogue.core.proactive import PROACTIVE_MODES, ProactiveConfig
from vision_dialogue.core.summariser import SummaryRule
from vision_dialogue.core.transcript import parse_retention
from vision_dialogue.application.identity.records import DEFAULT_QUEUE_FILE, MEMORY_NOTE_CHARS
from vision_dialogue.application.skills import CHAT_CORRECTION_S
from vision_dialogue.llm.factory import LLM_BACKENDS, BackendOptions, backend_class, \
    measured_focus_note
from vision_dialogue.ros.params import Param, nonempty
from vision_dialogue.ros.qos import IMAGE_QOS_CHOICES
from vision_dialogue.ros.managed import MANAGED_PARAM


def _file_or_empty(v):
    return None if not v or Path(v).is_file() else "no such file"


def _retention(v):
    try:
        parse_retention(v)
    except ValueError as e:
        return str(e)
    return None


PARAMS = [
    Param("n", 4, "Raw frames in the prompt that trigger a summary (the paper's n).",
          range=(2, 1000), live=True),
    Param("m", 3, "Frames summarised at once, m < n (the paper's m).", range=(1, 999),
          live=True),
    Param("llm_backend", "openai", "LLM backend: openai (any OpenAI-compatible server), "
          "transformers or llamacpp (a local model in this process), local (llamacpp where it "
          "is installed, else transformers).", choices=LLM_BACKENDS.names),
    Param("model", "gpt-4o-mini", "Model name (openai), checkpoint directory (transformers) "
          "or GGUF file (llamacpp); for a local backend empty or 'default' = the embedded "
          "default model, 'default:1.5b' = its larger variant, 'default:auto' = the 1.5B where "
          "a start-up measurement finds it fast enough for spoken replies, else the default "
          "(llm/model_choice.py; the log says which)."),
    Param("summary_model", "", "Model for frame summaries and history folding; empty = model."),
    Param("persona_file", "", "Persona/instructions YAML; empty = packaged config/persona.yaml.",
          check=_file_or_empty),
    Param("newest_max_side", 640, "Longest side (px) of the newest frame in the prompt.",
          range=(16, 4096)),
    Param("older_max_side", 256, "Longest side (px) of older frames in the prompt.",
          range=(16, 4096)),
    Param("jpeg_quality", 80, "JPEG quality of frames in the prompt.", range=(1, 100)),
    Param("image_detail", "low", "OpenAI image detail.", choices=DETAILS),
    Param("history_budget_chars", 3000, "Characters of dialogue lines + frame summaries kept "
          "verbatim before the oldest fold into a running summary.", range=(100, 10_000_000),
          live=True),
    Param("keep_recent_lines", 6, "Newest dialogue lines that always stay verbatim.",
          range=(0, 10_000), live=True),
    Param("max_reply_tokens", 150, "Token cap of a reply.", range=(1, 32768), live=True),
    Param("temperature", 0.0, "Sampling temperature of the LLM, for every backend (0.0: greedy, "
          "the same reply to the same prompt; a server's own default is not used).",
          range=(0.0, 2.0)),
    Param("reply_deadline", 15.0, "Seconds from an utterance's arrival to the first sentence "
          "of its reply; past it the fallback line is spoken and the late answer is only "
          "logged. An utterance still waiting for its turn at its deadline is dropped "
          "(logged, and written to the transcript).", range=(0.5, 3600.0), live=True),
    Param("max_queued_turns", 4, "Utterances that may wait while a reply is produced (those "
          "waiting together get one reply); when more arrive the oldest waiting one is "
          "dropped (logged, and written to the transcript).", range=(1, 1000), live=True),
    Param("request_timeout", 30.0, "Seconds per LLM request.", range=(0.1, 3600.0)),
    Param("max_summary_failures", 3, "Failed attempts after which frames are replaced by a "
          "neutral marker (they stay in the transcript).", range=(1, 1000)),
    Param("image_qos", "auto", "QoS of the camera subscriptions: auto = follow the "
          "publisher (reliable for stock drivers, best effort for sensor-data publishers); "
          "sensor_data or reliable = fixed (qos_overrides.* parameters refine it).",
          choices=IMAGE_QOS_CHOICES),
    Param("min_frame_interval", 0.0, "Seconds; frames stamped sooner than this after the "
          "last accepted one are skipped (by arrival for unstamped frames; 0 = keep all; "
          "camera_node already paces frames).",
          range=(0.0, 3600.0), live=True),
    Param("max_image_pixels", DEFAULT_MAX_PIXELS, "Largest image (width x height) decoded, "
          "checked against the size a frame declares before decoding it; larger frames are "
          "rejected (counted in prompt_state).", range=(1, 2**31 - 1), live=True),
    Param("stream", True, "Stream reply sentences as Reply chunks (final=false).", live=True),
    Param("summary_mode", "auto", "How frames are summarised: llm (the paper: the LLM writes "
          "each summary, in idle time, giving way to replies), merge (the frames' observations "
          "joined, no LLM), auto (merge for text-only models, llm otherwise).",
          choices=("auto", "llm", "merge")),
    Param("camera_timeout", 30.0, "Seconds without a frame after which the robot says it "
          "cannot see right now instead of describing the last frame; 0 = never.",
          range=(0.0, 86400.0), live=True),
    Param("greet_first", False, "Speak first: an opening remark when a person first "
          "appears, before the user has said anything (the paper's persona).", live=True),
    Param("transcript_dir", "runs/transcripts", "Folder for JSONL transcripts + frame JPEGs "
          "(relative to the working directory); empty = off."),
    Param("frame_retention", "keep", "How long stored frame JPEGs live: keep, none (never "
          "stored), session (deleted when the manager stops), or <N>d (deleted N days after "
          "their run, when a later run starts). The transcript's text stays.",
          check=_retention),
    Param("blur_faces", False, "Pixelate faces in every frame that is stored or sent out for "
          "display: transcript JPEGs and the dialogue/events thumbnails (the LLM still sees "
          "the frame as it is)."),
    Param("frame_id", "base_link", "frame_id of published headers.", check=nonempty),
    Param("prompt_state_period", 1.0, "Seconds between periodic PromptState messages; "
          "0 = only on change.", range=(0.0, 3600.0)),
    Param("visual_events", True, "Put camera/events (events_node: waves, arrivals, ...) into "
          "the prompt between frames."),
    Param("detections", True, "Put what object detectors publish on `detections` "
          "(vision_msgs/Detection2DArray; remap a detector's topic onto it) into the prompt, "
          "on the frame nearest in time, and classes coming or going as events."),
    Param("labels", [""], "Class names by index, for detectors that put a number in class_id "
          "and publish no label_info (vision_msgs/LabelInfo)."),
    Param("objects_min_score", 0.3, "Detections below this score are left out.",
          range=(0.0, 1.0)),
    Param("objects_sure", 0.45, "Detections below this score are said with 'maybe'.",
          range=(0.0, 1.0)),
    Param("objects_max_age", 5.0, "Seconds between a detection and a frame it may describe "
          "(older is stale); also how long a class must be gone to have left.",
          range=(0.1, 3600.0)),
    Param("ros4hri", True, "Take ROS4HRI (REP-155) in: voices' final speech as user turns, "
          "tracked persons (name, face place, expression) as the people notes and arrivals, "
          "a person becoming ENGAGING as the greeting, bodies' gestures as visual events."),
    Param("proactive", "paper", "When the robot speaks first besides greet_first: paper "
          "(never: the paper's user-initiated turns), arrivals (a person comes into view "
          "after nobody for 20 s; needs the observer's people count, i.e. a text-only model), "
          "arrivals_and_scenes (also when the view changes notably). In every mode but "
          "paper the robot answers a wave (camera/events).",
          choices=PROACTIVE_MODES),
    Param("proactive_interval", 60.0, "Seconds between two remarks the robot makes unasked.",
          range=(1.0, 3600.0)),
    Param("proactive_quiet", 8.0, "The user must have been quiet this many seconds before the "
          "robot speaks unasked.", range=(0.0, 600.0)),
    Param("people_store_url", "", "The people store (people_node's store_url) whose memory "
          "the robot uses: facts the one known person in view says of themselves are kept, "
          "and a reply is told what is remembered of them (docs/memory.md); set, the "
          "opening remark (greet_first) also waits for people_node's report of who is in "
          "view (at most PERSON_REPORT_WAIT_S once it reports); empty: off."),
    Param("memory_queue_file", DEFAULT_QUEUE_FILE, "Where facts and session summaries wait "
          "(durably, owner-only) while the people store is away; replayed when it answers.",
          check=nonempty),
    Param("memory_note_chars", MEMORY_NOTE_CHARS, "The standing note of what is remembered "
          "of a person, at most (characters); a line's note of the facts it asks about adds "
          "at most half as much again (docs/memory.md).", range=(40, 20000)),
    Param("memory_in_company", False, "Tell a reply what is remembered of a known person "
          "while others are in view too (off: only when they are alone with the robot)."),
    Param("proactive_wave_hold", ProactiveConfig.wave_hold_s, "Seconds a wave the robot could "
          "not answer at once (it was busy, just spoken to or spoke unasked) waits to be "
          "answered at the first frame when it may; 0: answered at once or never.",
          range=(0.0, 600.0)),
    Param("focus_note", "auto", "Text-only models: a short note right before the person's "
          "line (answer yes or no; for a question about the past, the memories it needs). "
          "strict: 'answer with yes or no'; soft: 'start with yes or no, then a few words'; "
          "auto: as measured for the embedded model's variant (0.5b strict, 1.5b soft), soft "
          "for other text-only models.", choices=("auto", "strict", "soft", "none")),
    Param("avoid_repeats", True, "A reply that only says again what the robot said before is "
          "asked for once more (sampled, told what not to say), unless the person asked to "
          "hear it again."),
    Param("warm_cache", True, "A local model reads the changed prompt (a new frame, a "
          "summary, a fold) between turns, so the next reply reads only the person's line."),
    Param("look_back", True, "Offer the look_back tool to an LLM that calls tools, on turns "
          "about the past (and whenever the VFM tools are offered): it sees a frame that left "
          "the prompt again, by time or by what it shows (the paper's future work)."),
    Param("decide_actions", "auto", "How the robot's own actions (robot_tools_file) are "
          "called: first = decided on a short prompt of the person's line before the reply "
          "(a small model acts on every request, not only the first); in_reply = the LLM calls "
          "them in its reply; auto = first for the embedded model, in_reply for a server.",
          choices=DECIDE_ACTIONS),
    Param("use_tools", False, "Offer the VFM server's tools (vfm/list_tools) to the LLM as "
          "function tools (Visual ChatGPT); false = the paper's setup."),
    Param("max_tool_rounds", 3, "Tool-call rounds per turn before the LLM must answer.",
          range=(1, 20), live=True),
    Param("tool_timeout", 120.0, "Seconds one tool call may take (then it is cancelled and "
          "the LLM hears the error).", range=(0.1, 3600.0)),
    Param("tool_discovery_timeout", 3.0, "Seconds the manager waits at startup for "
          "vfm/list_tools before answering without tools (it asks again later).",
          range=(0.0, 600.0)),
    Param("tool_images_to_llm", True, "Show the images tools make to the LLM (vision "
          "backends only), besides their file names."),
    Param("image_dir", "~/.ros/vision_dialogue/vfm_images", "The VFM server's image store "
          "(its image_dir), where pictures from dialogue/shared_image are saved.",
          check=nonempty),
    Param("skills", True, "Serve the communication skills skill/say, skill/ask and skill/chat "
          "(ROS 2 actions an application drives; docs/application.md)."),
    Param("free_conversation", True, "Answer the person's lines outside a Chat (the paper's "
          "behaviour); false: only inside a Chat or an Ask, other lines are heard (transcript, "
          "prompt) but not answered.", live=True),
    Param("max_waiting_skills", 4, "Skill goals that may wait while another runs (by priority, "
          "then arrival); one more is rejected.", range=(0, 100)),
    Param("ask_timeout", 60.0, "Seconds an Ask goal with timeout 0 may take in all.",
          range=(1.0, 3600.0), live=True),
    Param("chat_person_lost", 10.0, "Seconds without anyone in view after the robot's newest "
          "line (not while it owes one) after which a Chat ends (person_left); only where "
          "people are counted (a text-only model's observer, a tracker, ROS4HRI).",
          range=(0.5, 3600.0), live=True),
    Param("chat_correction", CHAT_CORRECTION_S, "Seconds after the robot's line that ends a "
          "Chat (its results in) in which the person's next line may still correct a result; "
          "the Chat is done after a line that corrects nothing or after this; 0: at once.",
          range=(0.0, 60.0), live=True),
    Param("intents_file", "", "YAML of the intents the robot can be asked for "
          "(config/intents.yaml shows the format); each person's turn that asks for one is "
          "published on `intents`; empty = off.", check=_file_or_empty),
    Param("robot_tools_file", "", "YAML of the robot's own services and actions the LLM may "
          "call as tools (config/robot_tools.yaml shows the format; docs/robot_tools.md); "
          "empty = none.", check=_file_or_empty),

    MANAGED_PARAM,
]
PARAMS[-1:-1] = LLM_BACKENDS.params()     # each backend's own (llm/factory.py)


def cross_check(v: dict) -> str | None:
    """Checks across parameters (run with every change)."""
    if v["objects_sure"] < v["objects_min_score"]:
        return (f"objects_sure ({v['objects_sure']:g}) must be at least objects_min_score "
                f"({v['objects_min_score']:g})")
    return SummaryRule.problem(v["n"], v["m"])


def backend_options(p) -> BackendOptions:
    """The LLM backend's options (llm/options.py): the common ones, and every value."""
    return BackendOptions(
        base_url=p["base_url"], model=p["model"], api_key_env=p["api_key_env"],
        timeout=p["request_timeout"], max_retries=p["max_retries"],
        supports_images=p["supports_images"], max_new_tokens=p["max_reply_tokens"],
        dtype=p["local_dtype"], temperature=p["temperature"], threads=p["local_threads"],
        params=dict(p))


def image_policy(p) -> ImagePolicy:
    return ImagePolicy(p["newest_max_side"], p["older_max_side"], p["jpeg_quality"],
                       p["image_detail"])


def focus_note_style(p) -> str:
    """focus_note as set, or (auto) what the battery measured for the embedded model."""
    if p["focus_note"] != "auto":
        return p["focus_note"]
    return measured_focus_note(p["llm_backend"], p["model"])


def conversation_config(p, policy: ImagePolicy) -> ConversationConfig:
    """The conversation's settings from the manager's parameters."""
    return ConversationConfig(
        n=p["n"], m=p["m"], policy=policy,
        history_budget_chars=p["history_budget_chars"],
        keep_recent_lines=p["keep_recent_lines"], max_reply_tokens=p["max_reply_tokens"],
        model=None if backend_class(p["llm_backend"]).in_process else p["model"],
        summary_model=p["summary_model"] or None, stream=p["stream"],
        max_summary_failures=p["max_summary_failures"], summary_mode=p["summary_mode"],
        camera_timeout_s=p["camera_timeout"], look_back=p["look_back"],
        focus_note=focus_note_style(p), avoid_repeats=p["avoid_repeats"],
        warm_cache=p["warm_cache"], decide_actions=p["decide_actions"])


def proactive_config(p) -> ProactiveConfig:
    return ProactiveConfig(p["proactive"], min_interval_s=p["proactive_interval"],
                           quiet_s=p["proactive_quiet"], wave_hold_s=p["proactive_wave_hold"])
