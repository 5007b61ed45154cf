package deny_dangerous_test

import rego.v1

import data.deny_dangerous

test_ordinary_call_allowed if {
	deny_dangerous.allow with input as {"tool_name": "files__read_file", "arguments": {"path": "notes.txt"}, "server_name": "files"}
}

test_destructive_tool_names_denied if {
	every name in ["files__delete_file", "db__drop_table", "rm", "disk__wipe-disk", "shell__kill_process"] {
		not deny_dangerous.allow with input as {"tool_name": name, "arguments": {}, "server_name": "x"}
	}
}

test_lookalike_names_allowed if {
	every name in ["docs__formatted_view", "notes__remember", "db__dropdown_options"] {
		deny_dangerous.allow with input as {"tool_name": name, "arguments": {}, "server_name": "x"}
	}
}

test_destructive_arguments_denied if {
	every command in ["rm -rf /", "sudo rm -fr ~", "DROP TABLE users;", "mkfs.ext4 /dev/sda", ":(){ :|:& };:"] {
		not deny_dangerous.allow with input as {"tool_name": "shell__run", "arguments": {"nested": {"command": command}}, "server_name": "shell"}
	}
}

test_deny_reason_names_the_tool if {
	reason := deny_dangerous.deny_reason with input as {"tool_name": "db__drop_table", "arguments": {}, "server_name": "db"}
	contains(reason, "db__drop_table")
}

test_missing_input_denies if {
	not deny_dangerous.allow with input as {}
}
