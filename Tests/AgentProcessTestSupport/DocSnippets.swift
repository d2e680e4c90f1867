// Docs as code: the lines of a README or DocC example, to compare with the same code compiled in a test file.

/// The lines of `text` between the line containing `begin` (from the start when `nil`) and the one containing `end`,
/// without the lines marked `// wrapper`, trailing spaces and blank lines.
/// - Parameters:
///   - text: The document or source file.
///   - begin: A text marking the line before the first one, or `nil` to start at the beginning.
///   - end: A text marking the line after the last one.
/// - Returns: The lines.
public func docSnippetLines(of text: some StringProtocol, from begin: String?, to end: String) -> [String] {
    var inside = begin == nil
    var lines: [String] = []
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        if !inside {
            inside = begin.map { line.contains($0) } ?? true
            continue
        }
        if line.contains(end) { break }
        if line.hasSuffix("// wrapper") { continue }
        let trimmed = String(line.reversed().drop { $0 == " " }.reversed())
        if !trimmed.isEmpty { lines.append(trimmed) }
    }
    return lines
}
