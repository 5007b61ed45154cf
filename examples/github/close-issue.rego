# Example `rego_policy` for examples/github/config.json (SPEC §3.7): the model may update an
# issue (title, body, labels, assignees, milestone, reopening) but never close one; closing
# stays with a person. Input: {tool_name, arguments, server_name}. The proxy allows only when
# `allow` is exactly true and shows `deny_reason` to the model, so the reason says what to do.
package close_issue

import rego.v1

default allow := false

allow if {
	is_string(input.tool_name)
	not closes_issue
}

# `update_issue` of any server: qualified in search mode (github__update_issue), bare in
# transparent mode. Matching the bare name means renaming the server in the config does not
# switch the rule off.
update_issue if input.tool_name == "update_issue"

update_issue if endswith(input.tool_name, "__update_issue")

# Arguments the policy cannot read (absent, null, not an object) are refused, never waved through.
closes_issue if {
	update_issue
	not readable_arguments
}

readable_arguments if is_object(input.arguments)

# `state` present and anything but "open" (any casing, surrounding whitespace): "closed",
# " CLOSED ", null, a list or an object all count as closing. The pinned server accepts only
# "open" and "closed", but another GitHub server (or a later version) may be more lenient.
closes_issue if {
	update_issue
	state := input.arguments.state
	not is_word(state, "open")
}

# `state_reason` ("completed", "not_planned", "duplicate") closes an issue on servers that
# accept it (GitHub's own MCP server does; the pinned one drops it). Only "reopened" is let
# through.
closes_issue if {
	update_issue
	reason := input.arguments.state_reason
	not is_word(reason, "reopened")
}

# A string equal to `word` once case and surrounding whitespace are ignored; never a non-string.
is_word(value, word) if {
	is_string(value)
	lower(trim_space(value)) == word
}

deny_reason := concat("", [
	input.tool_name,
	": closing an issue is refused by this proxy's policy; ask the user to close it on GitHub.",
	" Other updates (title, body, labels, assignees, milestone, reopening) are allowed:",
	` leave out "state" and "state_reason", or set "state" to "open".`,
]) if closes_issue

else := "the call has no tool name; this proxy refuses it" if not is_string(input.tool_name)
