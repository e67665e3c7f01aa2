"""Talking to language models (ROS-free).

The chat-backend interface, the OpenAI-compatible client, the local transformers backend and its
embedded default model, sentence streaming and the tool-call loop.

May import: nothing else of vision_dialogue (the bottom layer).
"""
