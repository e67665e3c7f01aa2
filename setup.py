"""Plain setuptools metadata (see setup.cfg).

The ROS build is CMakeLists.txt (package.xml says ament_cmake): colcon never runs this file.
`pip install .` installs the ROS-free core (timeline, summariser, LLM client, tool registry)
for use outside ROS; don't install it into an environment that also has the colcon-built
package, which provides the same import name plus the generated messages.
"""
from setuptools import setup

setup()
