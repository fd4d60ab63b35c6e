// Accent stripping as BERT uncased does it: each precomposed letter mapped to its base letter
// (a table of canonical decompositions), Hangul syllables split into their jamo, combining
// marks dropped.
#include <string>
#include <string_view>
#include <unordered_map>

#include "nn/text/unicode.h"

namespace ember::text {

namespace {

// Each base character and the precomposed characters whose canonical decomposition is that
// character followed only by combining marks (a few Greek ones decompose to a lone symbol:
// U+0387 ano teleia is canonically U+00B7 middle dot).
struct AccentedLetters {
  char32_t base;
  std::u32string_view variants;
};

constexpr AccentedLetters kAccentedLetters[] = {
    {U';', U";"},
    {U'A', U"ÀÁÂÃÄÅĀĂĄǍǞǠǺȀȂȦḀẠẢẤẦẨẪẬẮẰẲẴẶ"},
    {U'B', U"ḂḄḆ"},
    {U'C', U"ÇĆĈĊČḈ"},
    {U'D', U"ĎḊḌḎḐḒ"},
    {U'E', U"ÈÉÊËĒĔĖĘĚȄȆȨḔḖḘḚḜẸẺẼẾỀỂỄỆ"},
    {U'F', U"Ḟ"},
    {U'G', U"ĜĞĠĢǦǴḠ"},
    {U'H', U"ĤȞḢḤḦḨḪ"},
    {U'I', U"ÌÍÎÏĨĪĬĮİǏȈȊḬḮỈỊ"},
    {U'J', U"Ĵ"},
    {U'K', U"ĶǨḰḲḴ"},
    {U'L', U"ĹĻĽḶḸḺḼ"},
    {U'M', U"ḾṀṂ"},
    {U'N', U"ÑŃŅŇǸṄṆṈṊ"},
    {U'O', U"ÒÓÔÕÖŌŎŐƠǑǪǬȌȎȪȬȮȰṌṎṐṒỌỎỐỒỔỖỘỚỜỞỠỢ"},
    {U'P', U"ṔṖ"},
    {U'R', U"ŔŖŘȐȒṘṚṜṞ"},
    {U'S', U"ŚŜŞŠȘṠṢṤṦṨ"},
    {U'T', U"ŢŤȚṪṬṮṰ"},
    {U'U', U"ÙÚÛÜŨŪŬŮŰŲƯǓǕǗǙǛȔȖṲṴṶṸṺỤỦỨỪỬỮỰ"},
    {U'V', U"ṼṾ"},
    {U'W', U"ŴẀẂẄẆẈ"},
    {U'X', U"ẊẌ"},
    {U'Y', U"ÝŶŸȲẎỲỴỶỸ"},
    {U'Z', U"ŹŻŽẐẒẔ"},
    {U'`', U"`"},
    {U'a', U"àáâãäåāăąǎǟǡǻȁȃȧḁạảấầẩẫậắằẳẵặ"},
    {U'b', U"ḃḅḇ"},
    {U'c', U"çćĉċčḉ"},
    {U'd', U"ďḋḍḏḑḓ"},
    {U'e', U"èéêëēĕėęěȅȇȩḕḗḙḛḝẹẻẽếềểễệ"},
    {U'f', U"ḟ"},
    {U'g', U"ĝğġģǧǵḡ"},
    {U'h', U"ĥȟḣḥḧḩḫẖ"},
    {U'i', U"ìíîïĩīĭįǐȉȋḭḯỉị"},
    {U'j', U"ĵǰ"},
    {U'k', U"ķǩḱḳḵ"},
    {U'l', U"ĺļľḷḹḻḽ"},
    {U'm', U"ḿṁṃ"},
    {U'n', U"ñńņňǹṅṇṉṋ"},
    {U'o', U"òóôõöōŏőơǒǫǭȍȏȫȭȯȱṍṏṑṓọỏốồổỗộớờởỡợ"},
    {U'p', U"ṕṗ"},
    {U'r', U"ŕŗřȑȓṙṛṝṟ"},
    {U's', U"śŝşšșṡṣṥṧṩ"},
    {U't', U"ţťțṫṭṯṱẗ"},
    {U'u', U"ùúûüũūŭůűųưǔǖǘǚǜȕȗṳṵṷṹṻụủứừửữự"},
    {U'v', U"ṽṿ"},
    {U'w', U"ŵẁẃẅẇẉẘ"},
    {U'x', U"ẋẍ"},
    {U'y', U"ýÿŷȳẏẙỳỵỷỹ"},
    {U'z', U"źżžẑẓẕ"},
    {U'¨', U"΅῁῭΅"},
    {U'´', U"´"},
    {U'·', U"·"},
    {U'Æ', U"ǢǼ"},
    {U'Ø', U"Ǿ"},
    {U'æ', U"ǣǽ"},
    {U'ø', U"ǿ"},
    {U'ſ', U"ẛ"},
    {U'Ʒ', U"Ǯ"},
    {U'ʒ', U"ǯ"},
    {U'ʹ', U"ʹ"},
    {U'Α', U"ΆἈἉἊἋἌἍἎἏᾈᾉᾊᾋᾌᾍᾎᾏᾸᾹᾺΆᾼ"},
    {U'Ε', U"ΈἘἙἚἛἜἝῈΈ"},
    {U'Η', U"ΉἨἩἪἫἬἭἮἯᾘᾙᾚᾛᾜᾝᾞᾟῊΉῌ"},
    {U'Ι', U"ΊΪἸἹἺἻἼἽἾἿῘῙῚΊ"},
    {U'Ο', U"ΌὈὉὊὋὌὍῸΌ"},
    {U'Ρ', U"Ῥ"},
    {U'Υ', U"ΎΫὙὛὝὟῨῩῪΎ"},
    {U'Ω', U"ΏὨὩὪὫὬὭὮὯᾨᾩᾪᾫᾬᾭᾮᾯῺΏῼ"},
    {U'α', U"άἀἁἂἃἄἅἆἇὰάᾀᾁᾂᾃᾄᾅᾆᾇᾰᾱᾲᾳᾴᾶᾷ"},
    {U'ε', U"έἐἑἒἓἔἕὲέ"},
    {U'η', U"ήἠἡἢἣἤἥἦἧὴήᾐᾑᾒᾓᾔᾕᾖᾗῂῃῄῆῇ"},
    {U'ι', U"ΐίϊἰἱἲἳἴἵἶἷὶίιῐῑῒΐῖῗ"},
    {U'ο', U"όὀὁὂὃὄὅὸό"},
    {U'ρ', U"ῤῥ"},
    {U'υ', U"ΰϋύὐὑὒὓὔὕὖὗὺύῠῡῢΰῦῧ"},
    {U'ω', U"ώὠὡὢὣὤὥὦὧὼώᾠᾡᾢᾣᾤᾥᾦᾧῲῳῴῶῷ"},
    {U'ϒ', U"ϓϔ"},
    {U'І', U"Ї"},
    {U'А', U"ӐӒ"},
    {U'Г', U"Ѓ"},
    {U'Е', U"ЀЁӖ"},
    {U'Ж', U"ӁӜ"},
    {U'З', U"Ӟ"},
    {U'И', U"ЍЙӢӤ"},
    {U'К', U"Ќ"},
    {U'О', U"Ӧ"},
    {U'У', U"ЎӮӰӲ"},
    {U'Ч', U"Ӵ"},
    {U'Ы', U"Ӹ"},
    {U'Э', U"Ӭ"},
    {U'а', U"ӑӓ"},
    {U'г', U"ѓ"},
    {U'е', U"ѐёӗ"},
    {U'ж', U"ӂӝ"},
    {U'з', U"ӟ"},
    {U'и', U"йѝӣӥ"},
    {U'к', U"ќ"},
    {U'о', U"ӧ"},
    {U'у', U"ўӯӱӳ"},
    {U'ч', U"ӵ"},
    {U'ы', U"ӹ"},
    {U'э', U"ӭ"},
    {U'і', U"ї"},
    {U'Ѵ', U"Ѷ"},
    {U'ѵ', U"ѷ"},
    {U'Ә', U"Ӛ"},
    {U'ә', U"ӛ"},
    {U'Ө', U"Ӫ"},
    {U'ө', U"ӫ"},
    {U'᾿', U"῍῎῏"},
    {U'῾', U"῝῞῟"},
    {U'う', U"ゔ"},
    {U'か', U"が"},
    {U'き', U"ぎ"},
    {U'く', U"ぐ"},
    {U'け', U"げ"},
    {U'こ', U"ご"},
    {U'さ', U"ざ"},
    {U'し', U"じ"},
    {U'す', U"ず"},
    {U'せ', U"ぜ"},
    {U'そ', U"ぞ"},
    {U'た', U"だ"},
    {U'ち', U"ぢ"},
    {U'つ', U"づ"},
    {U'て', U"で"},
    {U'と', U"ど"},
    {U'は', U"ばぱ"},
    {U'ひ', U"びぴ"},
    {U'ふ', U"ぶぷ"},
    {U'へ', U"べぺ"},
    {U'ほ', U"ぼぽ"},
    {U'ゝ', U"ゞ"},
    {U'ウ', U"ヴ"},
    {U'カ', U"ガ"},
    {U'キ', U"ギ"},
    {U'ク', U"グ"},
    {U'ケ', U"ゲ"},
    {U'コ', U"ゴ"},
    {U'サ', U"ザ"},
    {U'シ', U"ジ"},
    {U'ス', U"ズ"},
    {U'セ', U"ゼ"},
    {U'ソ', U"ゾ"},
    {U'タ', U"ダ"},
    {U'チ', U"ヂ"},
    {U'ツ', U"ヅ"},
    {U'テ', U"デ"},
    {U'ト', U"ド"},
    {U'ハ', U"バパ"},
    {U'ヒ', U"ビピ"},
    {U'フ', U"ブプ"},
    {U'ヘ', U"ベペ"},
    {U'ホ', U"ボポ"},
    {U'ワ', U"ヷ"},
    {U'ヰ', U"ヸ"},
    {U'ヱ', U"ヹ"},
    {U'ヲ', U"ヺ"},
    {U'ヽ', U"ヾ"},
};

const std::unordered_map<char32_t, char32_t>& base_letters() {
  static const std::unordered_map<char32_t, char32_t> table = [] {
    std::unordered_map<char32_t, char32_t> base_of;
    for (const AccentedLetters& letters : kAccentedLetters) {
      for (char32_t variant : letters.variants) base_of.emplace(variant, letters.base);
    }
    return base_of;
  }();
  return table;
}

}  // namespace

std::u32string strip_accents(std::u32string_view text) {
  const auto& base_of = base_letters();
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (is_combining_mark(c)) continue;
    if (c < 0xC0) {
      out.push_back(c);
      continue;
    }
    // A Hangul syllable's canonical decomposition is its two or three jamo (leading consonant,
    // vowel, optional trailing consonant), computed from its position in the syllable block.
    constexpr char32_t kFirstSyllable = 0xAC00, kLastSyllable = 0xD7A3;
    if (c >= kFirstSyllable && c <= kLastSyllable) {
      constexpr char32_t kVowels = 21, kTrailing = 28;
      const char32_t index = c - kFirstSyllable;
      out.push_back(0x1100 + index / (kVowels * kTrailing));
      out.push_back(0x1161 + (index % (kVowels * kTrailing)) / kTrailing);
      if (index % kTrailing != 0) out.push_back(0x11A7 + index % kTrailing);
      continue;
    }
    const auto found = base_of.find(c);
    out.push_back(found == base_of.end() ? c : found->second);
  }
  return out;
}

}  // namespace ember::text
