"""The conversation (ROS-free).

The prompt and the turn: the paper's interleaved frame + dialogue timeline, frame summaries,
history folding, the prompt, the persona, turn taking, the reply, the transcript. The
application (skills, intents, robot tools, the people it knows) sits above it, in
application/; what every room shares sits below it, in common/.

May import: llm, common. Never rclpy or generated messages: testable in milliseconds.
"""
