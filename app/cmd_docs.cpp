// nmt completion SHELL and nmt manual DIR: shell completion scripts and man
// pages written from the CLI11 tables the commands are parsed with, so that
// neither can drift from --help. The build runs `nmt manual` and `nmt
// completion` to make the installed pages and scripts.
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "io/output_file.h"

namespace nmt::app {

namespace {

// One option as the pages and scripts need it.
struct Flag {
  std::vector<std::string> names;  // "-m", "--model"
  std::string help, value, fallback;
  std::vector<std::string> choices;  // a fixed set of values
  bool takes_value = false, repeats = false, positional = false;
  bool file = false;  // its value is a path (else free text or a number)
};

// The first sentence or clause, for a completion menu's one line.
std::string brief(const std::string& help) {
  size_t end = help.size();
  for (const char* stop : {". ", "; ", ": ", " ("}) end = std::min(end, help.find(stop));
  std::string b = help.substr(0, std::min<size_t>(end, 90));
  for (char& c : b)
    if (c == '\n' || c == '\t') c = ' ';
  return b;
}

// CLI11's type name: "TEXT", "INT:INT in [1 - 1024]", "TEXT:{a,b}".
Flag flag_of_option(const CLI::Option* o) {
  Flag f;
  for (const auto& s : o->get_snames()) f.names.push_back("-" + s);
  for (const auto& l : o->get_lnames()) f.names.push_back("--" + l);
  if (o->get_positional()) f.names = {o->get_name()}, f.positional = true;
  f.help = o->get_description();
  f.takes_value = o->get_expected_max() != 0;  // a flag expects none
  f.repeats = o->get_expected_max() > 1;
  const std::string type = o->get_type_name();
  f.value = type.substr(0, type.find(':'));
  // The commands declare a path's value as FILE, DIR or PATH (a file or a
  // directory); TEXT is free text.
  f.file = f.value == "FILE" || f.value == "DIR" || f.value == "PATH";
  if (const size_t open = type.find('{'), close = type.rfind('}');
      open != std::string::npos && close != std::string::npos && close > open) {
    std::string list = type.substr(open + 1, close - open - 1);
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      f.choices.push_back(list.substr(at, comma - at));
      at = comma + 1;
    }
  }
  const std::string d = o->get_default_str();
  if (f.takes_value && !d.empty() && d != "[]" && d != "\"\"") f.fallback = d;
  return f;
}

std::vector<Flag> flags_of(const CLI::App* cmd) {
  std::vector<Flag> flags;
  for (const CLI::Option* o : cmd->get_options()) flags.push_back(flag_of_option(o));
  return flags;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size())
    s.replace(at, from.size(), to);
  return s;
}

std::string single_quoted(const std::string& s) { return "'" + replace_all(s, "'", "'\\''") + "'"; }

std::string joined(const std::vector<std::string>& words, const std::string& sep = " ") {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : sep) + w;
  return s;
}

// ---- man pages (man(7) macros) ----

std::string roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    // A line that starts with a dot or quote would be read as a request.
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\')
      out += "\\e";
    else if (c == '-')
      out += "\\-";
    else
      out += c;
    line_start = c == '\n';
  }
  return out;
}

std::string man_flag(const Flag& f) {
  std::string s = ".TP\n";
  for (size_t i = 0; i < f.names.size(); ++i)
    s += (i ? ", " : "") + std::string(f.positional ? "\\fI" : "\\fB") + roff(f.names[i]) + "\\fR";
  if (f.takes_value && !f.positional)
    s += " \\fI" + roff(f.choices.empty() ? f.value : joined(f.choices, "|")) + "\\fR";
  if (f.repeats) s += " ...";
  s += "\n" + roff(f.help);
  if (!f.fallback.empty()) s += " (default: " + roff(f.fallback) + ")";
  return s + "\n";
}

std::string man_header(const std::string& title, const std::string& name, const std::string& what) {
  return ".TH " + title + " 1 \"\" \"nmt " NMT_VERSION "\" \"nmt manual\"\n.SH NAME\n" +
         roff(name) + " \\- " + roff(brief(what)) + "\n";
}

std::string man_page(const CLI::App* cmd) {
  std::string upper = "NMT-" + cmd->get_name();
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string s = man_header(upper, "nmt-" + cmd->get_name(), cmd->get_description());
  s += ".SH SYNOPSIS\n.B nmt " + roff(cmd->get_name()) + "\n[\\fIOPTIONS\\fR]\n";
  s += ".SH DESCRIPTION\n" + roff(cmd->get_description()) + "\n.SH OPTIONS\n";
  for (const Flag& f : flags_of(cmd)) s += man_flag(f);
  if (!cmd->get_footer().empty()) s += ".SH NOTES\n" + roff(cmd->get_footer()) + "\n";
  return s + ".SH SEE ALSO\n.BR nmt (1)\n";
}

std::string man_index(const CLI::App& app) {
  std::string s = man_header("NMT", "nmt", app.get_description());
  s += ".SH SYNOPSIS\n.B nmt\n\\fICOMMAND\\fR [\\fIOPTIONS\\fR]\n.br\n.B nmt\n"
       "[\\fB\\-\\-help\\fR] [\\fB\\-\\-version\\fR]\n";
  s += ".SH DESCRIPTION\n" + roff(app.get_description()) +
       ". Text comes on standard input and goes to standard output, one output line per "
       "input line, in order; logs and progress go to standard error.\n.SH COMMANDS\n";
  std::string see;
  for (const CLI::App* cmd : visible_commands(app)) {
    s += ".TP\n.B " + roff(cmd->get_name()) + "\n" + roff(cmd->get_description()) +
         "\nSee \\fBnmt\\-" + roff(cmd->get_name()) + "\\fR(1).\n";
    see += (see.empty() ? "" : ",\n") + std::string(".BR nmt\\-") + roff(cmd->get_name()) + " (1)";
  }
  s += ".SH OPTIONS\n";
  for (const Flag& f : flags_of(&app)) s += man_flag(f);
  return s + ".SH SEE ALSO\n" + see + "\n";
}

void write_manual(const CLI::App& app, const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path to = dir.empty() ? fs::path(".") : fs::path(dir);
  std::error_code ec;
  fs::create_directories(to, ec);
  if (ec) throw InputError("cannot make the directory '" + dir + "': " + ec.message());
  io::write_file(to / "nmt.1", man_index(app), io::Content::Text);
  for (const CLI::App* cmd : visible_commands(app))
    io::write_file(to / ("nmt-" + cmd->get_name() + ".1"), man_page(cmd), io::Content::Text);
}

// ---- completion scripts ----

std::string bash_command(const CLI::App* cmd) {
  std::vector<std::string> all, files, dirs, others;
  std::string choices;
  for (const Flag& f : flags_of(cmd)) {
    if (f.positional) continue;
    all.insert(all.end(), f.names.begin(), f.names.end());
    const std::string names = joined(f.names, "|");
    if (!f.takes_value) continue;
    if (!f.choices.empty())
      choices += "      " + names + ") COMPREPLY=($(compgen -W " +
                 single_quoted(joined(f.choices)) + " -- \"$cur\")); return ;;\n";
    else
      (f.value == "DIR" ? dirs : f.file ? files : others).push_back(names);
  }
  std::string s = "    " + cmd->get_name() + ")\n      case \"$prev\" in\n" + choices;
  if (!files.empty())
    s += "      " + joined(files, "|") +
         ") compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n";
  if (!dirs.empty())
    s += "      " + joined(dirs, "|") +
         ") compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- \"$cur\")); return ;;\n";
  if (!others.empty()) s += "      " + joined(others, "|") + ") return ;;\n";
  s += "      esac\n      opts=" + single_quoted(joined(all)) + " ;;\n";
  return s;
}

std::string bash_script(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* cmd : visible_commands(app)) names.push_back(cmd->get_name());
  std::string s =
      "# bash completion for nmt (written by `nmt completion bash`)\n"
      "_nmt() {\n"
      "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} opts\n"
      "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
      "    COMPREPLY=($(compgen -W " +
      single_quoted(joined(names) + " --help --version") +
      " -- \"$cur\"))\n"
      "    return\n"
      "  fi\n"
      "  case ${COMP_WORDS[1]} in\n";
  for (const CLI::App* cmd : visible_commands(app)) s += bash_command(cmd);
  s += "    *) return ;;\n  esac\n"
       "  if [[ $cur == -* ]]; then\n"
       "    COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
       "  else\n"
       "    compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- \"$cur\"))\n"
       "  fi\n"
       "}\n"
       "complete -F _nmt nmt\n";
  return s;
}

// zsh's _arguments spec: [description] ends at the first ']', and a colon
// separates the value's message and action.
std::string zsh_text(const std::string& s) {
  std::string out;
  for (char c : brief(s)) {
    if (c == '[' || c == ']' || c == ':' || c == '\\') out += '\\';
    out += c;
  }
  return replace_all(out, "'", "'\\''");
}

std::string zsh_flag(const Flag& f) {
  if (f.positional) return "    '*:" + zsh_text(f.names[0]) + ":_files' \\\n";
  std::string names = f.names.size() == 1 ? f.names[0] : "{" + joined(f.names, ",") + "}";
  std::string spec =
      (f.repeats ? "'*'" : "'(" + joined(f.names) + ")'") + names + "'[" + zsh_text(f.help) + "]";
  if (f.takes_value)
    spec += ":" + zsh_text(f.value) + ":" +
            (!f.choices.empty() ? "(" + joined(f.choices) + ")"
             : f.value == "DIR" ? std::string("_files -/")
             : f.file           ? std::string("_files")
                                : std::string(" "));
  return "    " + spec + "' \\\n";
}

std::string zsh_script(const CLI::App& app) {
  std::string s =
      "#compdef nmt\n# zsh completion for nmt (written by `nmt completion zsh`)\n"
      "_nmt() {\n  local -a commands\n  commands=(\n";
  for (const CLI::App* cmd : visible_commands(app))
    s += "    '" + cmd->get_name() + ":" + zsh_text(cmd->get_description()) + "'\n";
  s += "  )\n"
       "  if (( CURRENT == 2 )); then\n"
       "    _describe -t commands 'nmt command' commands\n"
       "    _arguments '--help[Print help]' '--version[Print the version]'\n"
       "    return\n"
       "  fi\n"
       "  local cmd=$words[2]\n"
       "  shift words\n"
       "  (( CURRENT-- ))\n"
       "  case $cmd in\n";
  for (const CLI::App* cmd : visible_commands(app)) {
    s += "  " + cmd->get_name() + ")\n    _arguments -s \\\n";
    for (const Flag& f : flags_of(cmd)) s += zsh_flag(f);
    s += "    ;;\n";
  }
  return s + "  esac\n}\n_nmt \"$@\"\n";
}

std::string fish_script(const CLI::App& app) {
  std::string s =
      "# fish completion for nmt (written by `nmt completion fish`)\n"
      "complete -c nmt -f\n"
      "complete -c nmt -n __fish_use_subcommand -l help -d 'Print help'\n"
      "complete -c nmt -n __fish_use_subcommand -l version -d 'Print the version'\n";
  for (const CLI::App* cmd : visible_commands(app))
    s += "complete -c nmt -n __fish_use_subcommand -a " + cmd->get_name() + " -d " +
         single_quoted(brief(cmd->get_description())) + "\n";
  for (const CLI::App* cmd : visible_commands(app)) {
    const std::string when = "-n '__fish_seen_subcommand_from " + cmd->get_name() + "'";
    for (const Flag& f : flags_of(cmd)) {
      std::string line = "complete -c nmt " + when;
      if (f.positional) {
        s += line + " -F\n";
        continue;
      }
      for (const auto& n : f.names)
        line += (n[1] == '-' ? " -l " + n.substr(2) : " -s " + n.substr(1));
      if (f.takes_value)
        line += !f.choices.empty() ? " -x -a " + single_quoted(joined(f.choices))
                : f.value == "DIR" ? std::string(" -x -a '(__fish_complete_directories)'")
                : f.file           ? std::string(" -r -F")
                                   : std::string(" -x");
      s += line + " -d " + single_quoted(brief(f.help)) + "\n";
    }
  }
  return s;
}

}  // namespace

void register_docs(CLI::App& app) {
  auto shell = std::make_shared<std::string>();
  auto* completion = app.add_subcommand(
      "completion",
      "Print a shell completion script: commands, options, their choices, and files where a "
      "file is asked for (bash: source <(nmt completion bash))");
  completion->add_option("shell", *shell, "bash, zsh or fish")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "fish"}));
  completion->callback([&app, shell] {
    std::fputs((*shell == "bash"  ? bash_script(app)
                : *shell == "zsh" ? zsh_script(app)
                                  : fish_script(app))
                   .c_str(),
               stdout);
  });
  // The build's: man pages of every command, written into a directory.
  auto dir = std::make_shared<std::string>();
  auto* manual = app.add_subcommand("manual", "Write the man pages (nmt.1, nmt-COMMAND.1)");
  manual->group("");
  manual->add_option("dir", *dir, "Directory to write them into")->type_name("DIR")->required();
  manual->callback([&app, dir] { write_manual(app, *dir); });
}

}  // namespace nmt::app
