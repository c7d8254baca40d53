"""What the tests share: real servers on 127.0.0.1 (servers), the fixtures that start them
(server_fixtures), and the reliability figures (figures)."""
