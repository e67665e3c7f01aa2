"""Talking to language models (ROS-free).

The chat-backend interface, the OpenAI-compatible client, the local transformers backend and its
embedded default model, sentence streaming and the tool-call loop; and how an answer is read:
checked against a JSON schema (answers), or as the declared intent a line asks for
(intent_reader).

May import: variants.
"""
