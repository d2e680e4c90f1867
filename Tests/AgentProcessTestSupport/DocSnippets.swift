// Docs as code: the lines of a README or DocC example, to compare with the same code compiled in a test file.
import Foundation

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

/// The first ```swift block of a module's DocC catalog page (`Sources/<module>/Documentation.docc/<module>.md`) and
/// the code a test file compiles for it (between `// DocC snippet <module> begins` and `… ends`), both without import
/// lines: what a test compares line by line.
/// - Parameters:
///   - module: The module whose catalog page it is.
///   - file: The test file (`#filePath`), at `<package root>/Tests/<target>/`.
/// - Returns: The article's lines and the compiled lines.
/// - Throws: When the page cannot be read or has no Swift block.
public func catalogExample(of module: String, compiledIn file: String) throws -> (article: [String], compiled: [String]) {
    let here = URL(fileURLWithPath: file)
    let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let page = root.appendingPathComponent("Sources/\(module)/Documentation.docc/\(module).md")
    let text = try String(contentsOf: page, encoding: .utf8)
    guard let opening = text.range(of: "```swift\n") else { throw TestSupportError("\(module).md has no Swift block") }
    let marker = "// DocC snippet \(module) "
    let source = try String(contentsOf: here, encoding: .utf8)
    let isCode: (String) -> Bool = { !$0.hasPrefix("import ") }
    return (
        docSnippetLines(of: text[opening.upperBound...], from: nil, to: "```").filter(isCode),
        docSnippetLines(of: source, from: marker + "begins", to: marker + "ends").filter(isCode)
    )
}
