import { ChatApp } from './_ui/chat-app';

/** `/`: the chat. The shell is static; the conversation comes from the session's event stream. */
export default function ChatPage() {
  return <ChatApp />;
}
