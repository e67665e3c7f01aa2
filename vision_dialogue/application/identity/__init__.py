"""People the robot knows (ROS-free): identity from faces and voices, with consent.

The store of enrolled people (embeddings, names and consent records, never images), the face
and voice embedders, matching a face track or an utterance to an enrolled person, and a
session's persons (known or anonymous, a face and a voice joined into one), the consent
question and "forget me". people_node wires these to REP-155's topics.

Part of the application room: may import core, llm, common. Never rclpy or generated
messages: testable without ROS.
"""
