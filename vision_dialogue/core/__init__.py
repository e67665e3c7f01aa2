"""The conversation (ROS-free).

The paper's interleaved frame + dialogue timeline, frame summaries, history folding, the prompt,
the persona, the transcript.

May import: llm. Never rclpy or generated messages: testable in milliseconds.
"""
