import ArgumentParser
import Foundation

/// The `coaty` command-line tool: run Coaty agents from the shell.
@main
struct Coaty: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coaty",
        abstract: "Run Coaty agents from the command line.",
        discussion: """
            Agents share typed objects over an MQTT broker with the Coaty protocol (version 3).
            Start with `coaty demo`: it needs no broker and no arguments.

            Exit codes: 0 success, 1 runtime failure (one line on stderr), 2 usage error.
            """,
        subcommands: [Demo.self]
    )

    /// Runs the command, mapping usage errors to exit code 2 as the CLI contract requires
    /// (swift-argument-parser uses 64 by default).
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            if code == .validationFailure {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}
