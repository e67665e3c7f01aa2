"""What the manager's LLM and the robot's application reach through it, connected.

* Visual ChatGPT's side (`use_tools`): the VFM server's tools for the LLM, found by the turn
  worker before its first turn, and pictures shared on `dialogue/shared_image` served in turn
  order (ros/manager/dialogue_tools.py);
* the robot's own services and actions as the LLM's tools (`robot_tools_file`,
  ros/manager/robot_tools.py), stopped when the person speaks or a chat ends;
* the application's skills (`skill/say`, `skill/ask`, `skill/chat`) and intents out
  (ros/manager/skill_servers.py, docs/application.md).
Each raises ParameterError for a setting it cannot take; the manager then stops what runs.
"""
from __future__ import annotations

from vision_dialogue.ros.manager.dialogue_tools import DialogueTools
from vision_dialogue.ros.manager.outputs import THUMBNAIL_SIDE
from vision_dialogue.ros.manager.robot_tools import RobotTools
from vision_dialogue.ros.manager.skill_host import ManagerSkillHost
from vision_dialogue.ros.manager.skill_servers import IntentOutput, SkillServers


def connect_vfm_tools(node, conversation, turns, camera, params, publish_record) -> DialogueTools:
    """The VFM tools for the LLM; shared pictures queue as turns.

    The turn-taker's hooks (manager_node) have its worker discover the tools and serve the
    pictures.
    """
    return DialogueTools(node, conversation, params, camera_frame_id=lambda: camera.frame_id,
                         publish_event=publish_record, on_shared=turns.shared_image,
                         thumbnail_side=THUMBNAIL_SIDE)


def connect_robot_tools(node, conversation, params, log) -> RobotTools | None:
    """The robot's services and actions as the LLM's tools (None: the backend cannot call)."""
    if not conversation.calls_tools:
        log.warning(f"robot_tools_file: the {params['llm_backend']!r} backend cannot call "
                    "tools; answering without the robot's tools")
        return None
    tools = RobotTools.from_file(
        node, params["robot_tools_file"], logger=log,
        on_entry=conversation.notify)
    conversation.add_tools(tools)
    conversation.tune(max_tool_rounds=params["max_tool_rounds"])
    log.info(f"robot tools for the LLM: {', '.join(tools.tools)}")
    return tools


def connect_application(node, conversation, turns, people, robot_tools, params, log):
    """The skills and the intents: (ManagerSkillHost, SkillServers or None, IntentOutput or None).

    Between skills, `free_conversation` (or a running chat) has the robot answer; barge-in, or
    the chat ending, stops a running robot action.
    """
    host = ManagerSkillHost(node, conversation, turns, people, log)
    skills = SkillServers(node, conversation, host, params, log) if params["skills"] else None
    intents = IntentOutput(node, conversation, host, params["intents_file"], log) \
        if params["intents_file"] else None
    if robot_tools is not None:
        turns.hear_with(lambda text, _: robot_tools.interrupt("the person spoke"))
        host.on_chat_end = lambda: robot_tools.interrupt("the chat skill ended")
    return host, skills, intents
