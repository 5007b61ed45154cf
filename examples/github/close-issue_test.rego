package close_issue_test

import rego.v1

import data.close_issue

update(arguments) := {"tool_name": "github__update_issue", "arguments": arguments, "server_name": "github"}

issue := {"owner": "octo", "repo": "hello", "issue_number": 7}

test_title_update_allowed if {
	close_issue.allow with input as update(object.union(issue, {"title": "Clearer title"}))
}

test_other_updates_allowed if {
	every change in [
		{"body": "More detail"},
		{"labels": ["bug"]},
		{"assignees": ["octocat"]},
		{"milestone": 2},
		{"state": "open"},
		{"state": " OPEN "},
		{"state": "open", "state_reason": "reopened"},
		{},
	] {
		close_issue.allow with input as update(object.union(issue, change))
	}
}

test_closing_denied_in_any_casing_or_shape if {
	every state in ["closed", "CLOSED", " Closed ", "\tclosed\n", "close", "resolved", "", null, ["closed"], {"value": "closed"}, true] {
		not close_issue.allow with input as update(object.union(issue, {"title": "x", "state": state}))
	}
}

test_closing_state_reason_denied if {
	every reason in ["completed", "NOT_PLANNED", " duplicate ", "", null] {
		not close_issue.allow with input as update(object.union(issue, {"state_reason": reason}))
	}
}

test_bare_name_and_renamed_server_covered if {
	every name in ["update_issue", "gh__update_issue", "work-github__update_issue"] {
		not close_issue.allow with input as {"tool_name": name, "arguments": {"state": "closed"}, "server_name": "x"}
	}
}

test_unreadable_arguments_denied if {
	every arguments in [null, "state=closed", ["closed"]] {
		not close_issue.allow with input as update(arguments)
	}
	not close_issue.allow with input as {"tool_name": "github__update_issue", "server_name": "github"}
}

test_other_tools_allowed if {
	every name in ["github__get_issue", "github__list_issues", "github__add_issue_comment", "github__update_issue_comment"] {
		close_issue.allow with input as {"tool_name": name, "arguments": {"state": "closed"}, "server_name": "github"}
	}
}

test_deny_reason_names_the_tool_and_the_way_out if {
	reason := close_issue.deny_reason with input as update(object.union(issue, {"state": "closed"}))
	contains(reason, "github__update_issue")
	contains(reason, "ask the user")
	contains(reason, "title")
}

test_no_deny_reason_when_allowed if {
	not close_issue.deny_reason with input as update(object.union(issue, {"title": "x"}))
}

test_missing_input_denies if {
	not close_issue.allow with input as {}
}
