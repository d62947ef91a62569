"""The ROS 2 layer: the only part of vision_nodes that imports rclpy or ROS messages."""
