// Keeping a chat within the model's context: the oldest turns go first.
#pragma once
#include <cstdint>
#include <vector>

namespace anvil {

// Drops the oldest messages of `msgs` until count(msgs) <= budget tokens. A leading "system" message stays;
// a dropped user message takes the replies that follow it along, so the history still starts with a user
// turn. The newest message is never dropped: returns false when it alone (with the system message) does not
// fit. Msg has a `role` string; count(msgs) returns the prompt length in tokens of those messages.
template <class Msg, class Count>
bool trim_chat_history(std::vector<Msg>& msgs, int64_t budget, Count&& count) {
  const size_t first = (!msgs.empty() && msgs[0].role == "system") ? 1 : 0;
  while (int64_t(count(msgs)) > budget) {
    if (msgs.size() <= first + 1) return false;
    msgs.erase(msgs.begin() + long(first));
    while (msgs.size() > first + 1 && msgs[first].role != "user") msgs.erase(msgs.begin() + long(first));
  }
  return true;
}

}  // namespace anvil
