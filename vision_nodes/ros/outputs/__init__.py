"""Results → ROS messages, one file per kind of output."""
